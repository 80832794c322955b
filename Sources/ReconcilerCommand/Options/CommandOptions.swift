import ArgumentParser

/// The options every command that works on the configured apps' stored data takes, in one group
/// so each takes them alike: which apps (`--config`, `--app`, `--environment`), the database, the
/// logs. A command declares `@OptionGroup var options: StoredDataOptions` and reads `app`,
/// `database` and `logging` as before (``UsesAppsOptions``).
struct StoredDataOptions: ParsableArguments {
    @OptionGroup var app: AppOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions
}

/// ``StoredDataOptions`` and Apple's API (the key, its base URL, the request budget): the options
/// of every command that calls Apple as the configured apps.
struct AppleOptions: ParsableArguments {
    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions
}

/// The options of a command over the configured apps: ``StoredDataOptions`` or ``AppleOptions``.
protocol AppsOptionGroup: ParsableArguments {
    var app: AppOptions { get }
    var database: DatabaseOptions { get }
    var logging: LoggingOptions { get }
}

extension StoredDataOptions: AppsOptionGroup {}
extension AppleOptions: AppsOptionGroup {}

/// A command that declares `@OptionGroup var options` of one of the groups, and reads its options
/// by their names (`app`, `database`, `logging`, and `api` when it calls Apple).
protocol UsesAppsOptions {
    associatedtype Options: AppsOptionGroup
    var options: Options { get }
}

extension UsesAppsOptions {
    var app: AppOptions { options.app }
    var database: DatabaseOptions { options.database }
    var logging: LoggingOptions { options.logging }
}

extension UsesAppsOptions where Options == AppleOptions {
    var api: APIOptions { options.api }
}
