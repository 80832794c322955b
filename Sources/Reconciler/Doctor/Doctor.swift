package import AppStoreServer
package import Foundation
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// The checks of `reconciler doctor` that need no App Store: the configuration, the files it
/// names, the database. Each check is a small function that returns its results; the command
/// gathers them, prints one line each and exits by ``DoctorReport/exitClass``.
///
/// ```swift
/// let doctor = Doctor(now: Date())
/// var results = [Doctor.configurationLoaded(deployment)] + doctor.fileChecks(deployment)
/// results += await doctor.databaseChecks(database)
/// ```
package struct Doctor: Sendable {
    /// What the configuration says of the deployment, as far as the checks need it (the command
    /// reads it from the configuration file or the `APP_STORE_*` variables).
    package struct Deployment: Sendable {
        /// An In-App Purchase key file and the apps that use it.
        package struct KeyFile: Sendable {
            package var path: String
            package var keyId: String
            /// Bundle IDs of the apps signing with it.
            package var apps: [String]
            /// Where the path is set, for the fix line (`key.privateKeyPath in /etc/reconciler/reconciler.yaml`).
            package var setting: String

            package init(path: String, keyId: String, apps: [String], setting: String) {
                self.path = path
                self.keyId = keyId
                self.apps = apps
                self.setting = setting
            }
        }

        /// The configuration file, or "the environment (APP_STORE_*)".
        package var source: String
        /// The apps and environments the checks cover (what `--app` and `--environment` leave).
        package var targets: [AppTarget]
        package var keyFiles: [KeyFile]
        /// Trusted root files or directories; `nil`: the bundled Apple Root CA - G3.
        package var rootCertificates: [String]?
        /// Where the roots are set, for the fix line.
        package var rootCertificatesSetting: String
        /// The app API's token file (`appApi.tokenFile`), when configured.
        package var appApiTokenFile: String?
        /// Apps configured without an In-App Purchase key (the `APP_STORE_*` variables name none).
        package var appsWithoutKey: [String] = []

        package init(
            source: String, targets: [AppTarget], keyFiles: [KeyFile], rootCertificates: [String]?, rootCertificatesSetting: String,
            appApiTokenFile: String? = nil
        ) {
            self.source = source
            self.targets = targets
            self.keyFiles = keyFiles
            self.rootCertificates = rootCertificates
            self.rootCertificatesSetting = rootCertificatesSetting
            self.appApiTokenFile = appApiTokenFile
        }
    }

    /// When the checks run (a root's remaining validity is judged by it).
    package var now: Date
    /// A root certificate with less than this left warns.
    package var rootExpiryWarning: Duration = .seconds(90 * 86_400)
    /// A session of this role idle in a transaction for longer fails.
    package var idleTransactionLimit: Duration = .seconds(5 * 60)
    /// A delivery waiting longer to be forwarded fails.
    package var forwardQueueLimit: Duration = .seconds(60 * 60)
    /// A change feed that keeps changes older than this warns: nothing prunes it.
    package var feedAgeWarning: Duration = .seconds(90 * 86_400)

    package init(now: Date) {
        self.now = now
    }

    // MARK: The configuration

    /// The configuration loaded: what it configures.
    package static func configurationLoaded(_ deployment: Deployment) -> DoctorResult {
        var apps: [String] = []
        for target in deployment.targets where !apps.contains(target.bundleId) { apps.append(target.bundleId) }
        let listed = apps.map { bundleId in
            "\(bundleId) (\(deployment.targets.filter { $0.bundleId == bundleId }.map(\.environment.rawValue).joined(separator: ", ")))"
        }
        return .ok(.config, "\(deployment.source) loads: \(listed.joined(separator: ", "))")
    }

    /// The configuration does not load: nothing else can be checked until it does.
    package static func configurationFailed(_ error: any Error) -> DoctorResult {
        let failure = ReconcilerError(endingCommandWith: error) ?? .configuration("\(error)")
        return DoctorResult(
            .config, status: .fail, detail: failure.description,
            fix: failure.remedy
                ?? "Correct what the message names (docs/reference.md, Configuration reference); nothing else is checked until it loads.")
    }

    // MARK: Files

    /// Each key file, the root certificates and the app API's token file load.
    package func fileChecks(_ deployment: Deployment) -> [DoctorResult] {
        deployment.appsWithoutKey.map(Self.noKey) + deployment.keyFiles.map(Self.keyFile) + [rootCertificates(deployment)]
            + (deployment.appApiTokenFile.map { [Self.tokenFile($0)] } ?? [])
    }

    static func noKey(_ app: String) -> DoctorResult {
        DoctorResult(
            .keyFile, app: app, status: .fail, detail: "no In-App Purchase key is configured",
            fix: "Set APP_STORE_KEY_ID, APP_STORE_ISSUER_ID and APP_STORE_PRIVATE_KEY_PATH (or the configuration file's key).")
    }

    static func keyFile(_ key: Deployment.KeyFile) -> DoctorResult {
        let app = key.apps.count == 1 ? key.apps.first : nil
        do {
            _ = try APIAuthenticationTokens.loadPrivateKey(path: key.path)
            return .ok(.keyFile, app: app, "key \(key.keyId) (\(key.path)) loads, for \(key.apps.joined(separator: ", "))")
        } catch {
            return DoctorResult(
                .keyFile, app: app, status: .fail, detail: "key \(key.keyId): \(error)",
                fix:
                    "Put the .p8 file of key \(key.keyId) (App Store Connect, Users and Access, Integrations, In-App Purchase) at \(key.path), readable by this user, or correct \(key.setting)."
            )
        }
    }

    func rootCertificates(_ deployment: Deployment) -> DoctorResult {
        let roots: [TrustedRoots.Validity]
        do {
            roots = try TrustedRoots.validity(paths: deployment.rootCertificates)
        } catch {
            return DoctorResult(
                .rootCertificates, status: .fail, detail: "\(error)",
                fix:
                    "Point \(deployment.rootCertificatesSetting) at Apple's root certificate (Apple Root CA - G3, PEM or DER, from apple.com/certificateauthority), or remove it to use the bundled one."
            )
        }
        let soonest = roots.min { $0.notValidAfter < $1.notValidAfter }!
        let left = soonest.notValidAfter.timeIntervalSince(now)
        let until = "\(soonest.subject) valid until \(soonest.notValidAfter.formatted(.iso8601))"
        if left <= 0 {
            return DoctorResult(
                .rootCertificates, status: .fail, detail: "\(until): expired",
                fix: "Replace it in \(deployment.rootCertificatesSetting) with Apple's current root (apple.com/certificateauthority).")
        }
        if left < Double(rootExpiryWarning.components.seconds) {
            return DoctorResult(
                .rootCertificates, status: .warn, detail: "\(until): \(Int(left / 86_400)) days left",
                fix: "Add Apple's next root (apple.com/certificateauthority) to \(deployment.rootCertificatesSetting) before it expires.")
        }
        return .ok(.rootCertificates, "\(Plural.count(roots.count, "root")) \(roots.count == 1 ? "loads" : "load"); \(until)")
    }

    /// The app API's token file: there, readable and not empty (its contents are never shown).
    static func tokenFile(_ path: String) -> DoctorResult {
        let fix = "Write the app API's token to \(path) (appApi.tokenFile), readable by this user."
        guard let data = FileManager.default.contents(atPath: path) else {
            return DoctorResult(.appApiTokenFile, status: .fail, detail: "\(path) does not exist or cannot be read", fix: fix)
        }
        guard !String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return DoctorResult(.appApiTokenFile, status: .fail, detail: "\(path) is empty", fix: fix)
        }
        return .ok(.appApiTokenFile, "\(path) is readable and holds a token")
    }

    // MARK: The database

    /// The database could not be used: no URL, a refused login, no answer within the timeout
    /// (transient: exit 2 when nothing else fails).
    package static func databaseUnreachable(_ error: any Error) -> DoctorResult {
        let failure = ReconcilerError(endingCommandWith: error) ?? .configuration("\(error)")
        return DoctorResult(
            .database, status: .fail, detail: failure.description,
            fix: "Check DATABASE_URL (or --database-url): its host, port, user and password, and that PostgreSQL accepts connections from here.",
            transient: failure.code.exitClass == .retryable)
    }

    /// The database answers: its migrations, its sessions idle in a transaction, the forward
    /// queue and the change feed.
    package func databaseChecks(_ database: Database) async -> [DoctorResult] {
        var results: [DoctorResult] = [.ok(.database, "\(database.configuration.name) answers")]
        results.append(await Self.guarded(.migrations) { try await Self.migrations(database) })
        results.append(await Self.guarded(.idleTransactions) { try await idleTransactions(database) })
        results.append(await Self.guarded(.forwardQueue) { try await forwardQueue(database) })
        results.append(await Self.guarded(.feed) { try await feed(database) })
        return results
    }

    /// A check that could not read what it checks fails with the reason (transient when the
    /// database went away meanwhile).
    static func guarded(_ check: DoctorCheck, _ body: () async throws -> DoctorResult) async -> DoctorResult {
        do {
            return try await body()
        } catch {
            let failure = ReconcilerError(endingCommandWith: error) ?? .configuration("\(error)")
            let transient = failure.code.exitClass == .retryable
            return DoctorResult(
                check, status: .fail, detail: "cannot be read: \(failure.description)",
                fix: transient ? "Run doctor again once the database answers." : "Run `reconciler migrate`, then doctor again.",
                transient: transient)
        }
    }

    static func migrations(_ database: Database) async throws -> DoctorResult {
        let statuses: [Migrator.Status]
        do {
            statuses = try await Migrator().status(database)
        } catch let error as ReconcilerError where error.code == .schemaNotCurrent {
            return DoctorResult(
                .migrations, status: .fail, detail: error.description, fix: "Follow the message: the schema and this version disagree.")
        }
        let pending = statuses.filter { $0.appliedAt == nil }.map(\.migration.fileName)
        guard pending.isEmpty else {
            return DoctorResult(
                .migrations, status: .fail, detail: "\(Plural.count(pending.count, "migration")) not applied: \(pending.joined(separator: ", "))",
                fix: "Run `reconciler migrate` with this version, then restart serve.")
        }
        return .ok(.migrations, "current: \(Plural.count(statuses.count, "migration")) applied")
    }

    func idleTransactions(_ database: Database) async throws -> DoctorResult {
        let idle = try await DeploymentHealth(database: database).idleTransactions(longerThan: idleTransactionLimit)
        let limit = idleTransactionLimit.operatorText
        if idle.ownRole > 0 {
            return DoctorResult(
                .idleTransactions, status: .fail,
                detail: "\(Plural.count(idle.ownRole, "session")) of this role idle in a transaction for more than \(limit)"
                    + (idle.oldestOwnSince.map { " (the oldest since \($0.formatted(.iso8601)))" } ?? ""),
                fix:
                    "Find them in pg_stat_activity (state 'idle in transaction') and end them with pg_terminate_backend: they hold locks the webhook waits on."
            )
        }
        if idle.hidden > 0 || idle.otherRoles > 0 {
            let parts =
                (idle.otherRoles > 0
                    ? ["\(Plural.count(idle.otherRoles, "session")) of other roles idle in a transaction for more than \(limit)"] : [])
                + (idle.hidden > 0 ? ["\(Plural.count(idle.hidden, "session")) of other roles this role cannot see"] : [])
            return DoctorResult(
                .idleTransactions, status: .warn, detail: "none of this role; " + parts.joined(separator: ", "),
                fix: idle.hidden > 0
                    ? "Grant this role pg_read_all_stats (or pg_monitor) so doctor can see every session on the database."
                    : "Look at those sessions in pg_stat_activity: a transaction left open holds its locks.")
        }
        return .ok(.idleTransactions, "no session idle in a transaction for more than \(limit)")
    }

    func forwardQueue(_ database: Database) async throws -> DoctorResult {
        let queue = ForwardQueue(database: database)
        let summary = try await queue.summary(runIds: nil)
        guard let oldest = summary.oldestPending else {
            return .ok(.forwardQueue, "nothing waiting (\(summary.delivered) delivered, \(summary.failed) failed)")
        }
        let age = try await queue.databaseTime().timeIntervalSince(oldest)
        let waiting = "\(summary.pending) pending, the oldest queued \(oldest.formatted(.iso8601))"
        guard age < Double(forwardQueueLimit.components.seconds) else {
            return DoctorResult(
                .forwardQueue, status: .fail, detail: "\(waiting), more than \(forwardQueueLimit.operatorText) ago",
                fix:
                    "Run a forwarder for each waiting URL (`reconciler status` lists them; `reconciler forward`) and check that the app's webhook answers."
            )
        }
        return .ok(.forwardQueue, waiting)
    }

    /// `12.3 MB`.
    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    func feed(_ database: Database) async throws -> DoctorResult {
        let size = try await DeploymentHealth(database: database).feedSize()
        let detail =
            "\(size.estimatedRows < 100_000 ? "" : "about ")\(size.estimatedRows) changes, \(Self.megabytes(size.bytes)) on disk"
            + (size.oldestChange.map { ", the oldest \($0.formatted(.iso8601))" } ?? "")
        if let oldest = size.oldestChange, size.now.timeIntervalSince(oldest) > Double(feedAgeWarning.components.seconds) {
            return DoctorResult(
                .feed, status: .warn, detail: detail + ": older than \(feedAgeWarning.operatorText)",
                fix: "Prune daily from cron: `reconciler prune --changes-older-than 30d` (operations.md, Retention).")
        }
        return .ok(.feed, detail)
    }
}
