import ArgumentParser

/// The options every command that works on the configured apps' stored data takes, in one group
/// so each takes them alike: which apps (`--config`, `--app`, `--environment`), the database, the
/// logs. A command declares `@OptionGroup var options: StoredDataOptions` and reads `app`,
/// `database` and `logging` as before (``UsesStoredData``).
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

/// A command that takes ``StoredDataOptions``.
protocol UsesStoredData {
    var options: StoredDataOptions { get }
}

extension UsesStoredData {
    var app: AppOptions { options.app }
    var database: DatabaseOptions { options.database }
    var logging: LoggingOptions { options.logging }
}

/// A command that takes ``AppleOptions``.
protocol CallsApple {
    var options: AppleOptions { get }
}

extension CallsApple {
    var app: AppOptions { options.app }
    var api: APIOptions { options.api }
    var database: DatabaseOptions { options.database }
    var logging: LoggingOptions { options.logging }
}
