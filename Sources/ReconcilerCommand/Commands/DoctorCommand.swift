import AppStoreServer
import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain

struct DoctorCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the deployment: configuration, key and certificate files, database, Apple; one line per check with its fix.",
        discussion: """
            Runs every check for every configured app and environment (--app and --environment narrow them) and \
            prints one line per check: ok, warn or FAIL, what it saw, and for warn and FAIL the fix in one sentence. \
            --json prints one JSON array of {check, app, environment, status, detail, fix} (status ok, warn or \
            fail; app and environment null for checks of the whole deployment). The checks are listed in \
            docs/reference.md (doctor). No line holds a secret: files and keys are named, never their contents.

            Exit 1 when a check fails, 2 when the only failures may pass on their own (the database did not \
            answer in time: run it again), 4 when a check warns, 0 when all is well.

              reconciler doctor
              reconciler doctor --app com.example.one --json
            """)

    @Flag(help: "Print one JSON array instead of lines.") var json = false
    @Flag(
        help:
            "Set each app's notification URLs in App Store Connect to notificationURL, Version 2, where they differ (Modify an App); needs appStoreConnect and notificationURL."
    )
    var fixNotificationUrls = false
    @Flag(help: "With --fix-notification-urls: print the old and new values, change nothing.") var dryRun = false
    @Flag(
        help:
            "Also ask Apple for a TEST notification for each app and environment and check that it arrives and is stored (as check-webhook does)."
    )
    var sendTest = false
    @Option(help: ArgumentHelp("With --send-test: how long to wait for Apple's delivery attempt, in seconds.", valueName: "s"))
    var timeout: Int = 60

    func validate() throws {
        if dryRun, !fixNotificationUrls { throw ValidationError("--dry-run goes with --fix-notification-urls") }
    }

    @OptionGroup var options: AppleOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let doctor = Doctor(now: Date())
        var results: [DoctorResult] = []
        let loaded: (deployment: Doctor.Deployment, targets: [ReconcilerConfiguration.Target], connect: ReconcilerConfiguration.AppStoreConnectKey?)
        do {
            loaded = try deployment()
        } catch {
            // Nothing else can be checked until the configuration loads.
            try finish(DoctorReport(results: [Doctor.configurationFailed(error)]))
            return
        }
        if fixNotificationUrls { try Self.refuseFixing(loaded.targets, connect: loaded.connect) }
        results.append(Doctor.configurationLoaded(loaded.deployment))
        results += doctor.fileChecks(loaded.deployment)
        do {
            results += try await database.withDatabase(logger: logger) { database in await doctor.databaseChecks(database) }
        } catch {
            results.append(Doctor.databaseUnreachable(error))
        }
        // The budget is shared through the database only when its schema is this version's.
        let sharesBudget = results.contains { $0.check == .migrations && $0.status == .ok }
        results += Doctor.appleChecks(try await probe(loaded.targets, sharingBudget: sharesBudget, logger: logger))
        results += try await notificationURLs(loaded.targets, connect: loaded.connect)
        results += await serveHealth(loaded.targets)
        if sendTest { results += await testNotifications(logger: logger) }
        try finish(DoctorReport(results: results))
    }

    /// Prints the report and ends as its results say.
    private func finish(_ report: DoctorReport) throws {
        if json {
            try StandardOutput.printJSON(report)
        } else {
            for line in report.lines { print(line) }
            print(report.summary)
        }
        if let ending = report.ending { throw ending }
    }

    /// One cheap request per app and environment whose key loads (one that does not is the
    /// key-file check's), through the app's shared budget when `sharingBudget`.
    private func probe(
        _ targets: [ReconcilerConfiguration.Target], sharingBudget: Bool, logger: Logger
    ) async throws -> [Doctor.AppleProbe] {
        var keys = APIOptions.PrivateKeys()
        var callers: [(target: ReconcilerConfiguration.Target, sharing: BudgetSharing)] = []
        for target in targets {
            let budget = try api.requestBudget(for: target)
            guard let client = try? api.client(for: target, budget: budget, keys: &keys) else { continue }
            callers.append((target, BudgetSharing(client: client, target: target.app, budget: budget, endpoints: [.getNotificationHistory])))
        }
        let probing = callers.map { (app: $0.target.app, keyId: $0.target.key?.id ?? "?", client: $0.sharing.client) }
        let work: @Sendable () async throws -> [Doctor.AppleProbe] = {
            var probes: [Doctor.AppleProbe] = []
            for caller in probing {
                let probe = try await caller.client.probe()
                probes.append(.init(app: caller.app, keyId: caller.keyId, error: probe.error, timing: probe.timing))
            }
            return probes
        }
        guard sharingBudget, !callers.isEmpty else { return try await work() }
        return try await database.runWork(logger: logger, sharing: callers.map(\.sharing)) { _ in try await work() }
    }

    /// What the configuration (the file, or the `APP_STORE_*` variables) says the checks cover,
    /// and its targets that `--app` and `--environment` leave.
    private func deployment() throws -> (Doctor.Deployment, [ReconcilerConfiguration.Target], ReconcilerConfiguration.AppStoreConnectKey?) {
        var configuration = try app.configuration(key: try api.environmentKey(), apiBaseURL: try api.baseURLOverride())
        if app.configurationFile == nil {
            for index in configuration.targets.indices { api.namingFlags(in: &configuration.targets[index].origins) }
        }
        let targets = try app.targets(in: configuration)
        var keyFiles: [Doctor.Deployment.KeyFile] = []
        var appsWithoutKey: [String] = []
        for target in targets {
            guard let key = target.key else {
                appsWithoutKey.append(target.app.bundleId)
                continue
            }
            if let index = keyFiles.firstIndex(where: { $0.path == key.privateKeyPath }) {
                if !keyFiles[index].apps.contains(target.app.bundleId) { keyFiles[index].apps.append(target.app.bundleId) }
            } else {
                keyFiles.append(
                    .init(path: key.privateKeyPath, keyId: key.id, apps: [target.app.bundleId], setting: "\(target.origins.privateKeyPath)"))
            }
        }
        var deployment = Doctor.Deployment(
            source: configuration.source, targets: targets.map(\.app), keyFiles: keyFiles, rootCertificates: configuration.rootCertificates,
            rootCertificatesSetting: targets.first.map { "\($0.origins.rootCertificates)" } ?? "rootCertificates",
            appApiTokenFile: configuration.appApiTokenFile)
        deployment.appsWithoutKey = Array(Set(appsWithoutKey)).sorted()
        return (deployment, targets, configuration.appStoreConnect)
    }

    // MARK: App Store Connect

    /// `--fix-notification-urls` needs the App Store Connect key and, for every app it would
    /// change, the URL to set.
    static func refuseFixing(_ targets: [ReconcilerConfiguration.Target], connect: ReconcilerConfiguration.AppStoreConnectKey?) throws {
        guard connect != nil else {
            throw ReconcilerError.configuration(
                "--fix-notification-urls needs an App Store Connect API key: set appStoreConnect {id, issuer, privateKeyPath} in the configuration file"
            )
        }
        let without = Set(targets.filter { $0.notificationURL == nil }.map(\.app.bundleId)).sorted()
        guard without.isEmpty else {
            throw ReconcilerError.configuration(
                "--fix-notification-urls needs notificationURL (the URL Apple should call: this deployment's serve) for \(without.joined(separator: ", ")): set it at the top level or in the app's entry; nothing was changed"
            )
        }
    }

    /// Each app's notification settings in App Store Connect, checked against `notificationURL`
    /// (and with `--fix-notification-urls`, changed first where they differ). None without an
    /// App Store Connect key.
    private func notificationURLs(
        _ targets: [ReconcilerConfiguration.Target], connect: ReconcilerConfiguration.AppStoreConnectKey?
    ) async throws -> [DoctorResult] {
        guard let connect else { return [] }
        let privateKey: P256.Signing.PrivateKey
        do {
            privateKey = try APIAuthenticationTokens.loadPrivateKey(path: connect.privateKeyPath)
        } catch {
            return [
                DoctorResult(
                    .notificationURLs, status: .fail, detail: "the App Store Connect key \(connect.id): \(error)",
                    fix: "Put the .p8 of App Store Connect API key \(connect.id) at \(connect.privateKeyPath) (appStoreConnect.privateKeyPath).")
            ]
        }
        let client = AppStoreConnectClient(
            configuration: .init(baseURL: connect.baseURL, privateKey: privateKey, keyId: connect.id, issuerId: connect.issuer))
        var settings: [Doctor.NotificationSettings] = []
        for bundleId in Self.bundleIds(targets) {
            let ofApp = targets.filter { $0.app.bundleId == bundleId }
            let appAppleId = ofApp.compactMap(\.app.appAppleId).first
            let notificationURL = ofApp.first?.notificationURL
            var lookup = await Self.lookUp(client, bundleId: bundleId, appAppleId: appAppleId)
            if fixNotificationUrls, let notificationURL, case .success(let found?) = lookup,
                let change = Doctor.notificationURLFix(found, notificationURL: notificationURL)
            {
                for line in Doctor.changeLines(bundleId, from: found, to: change) {
                    // Beside --json, on standard error: the JSON stays one array.
                    let text = (dryRun ? "would change " : "changing ") + line
                    if json { FileHandle.standardError.write(Data((text + "\n").utf8)) } else { print(text) }
                }
                if !dryRun {
                    do {
                        lookup = .success(try await client.modifyApp(id: found.id, change))
                    } catch {
                        lookup = .failure(error)
                    }
                }
            }
            settings.append(
                .init(
                    bundleId: bundleId, environments: ofApp.map(\.app.environment), notificationURL: notificationURL,
                    environmentsSetting: "\(ofApp[0].origins.environment)", lookup: lookup))
        }
        return Doctor.notificationURLChecks(settings)
    }

    private static func lookUp(
        _ client: AppStoreConnectClient, bundleId: String, appAppleId: Int64?
    ) async -> Result<AppStoreConnectApp?, any Error> {
        do {
            if let appAppleId { return .success(try await client.app(id: String(appAppleId))) }
            return .success(try await client.app(bundleId: bundleId))
        } catch {
            return .failure(error)
        }
    }

    /// The bundle IDs of `targets`, each once, in the configuration's order.
    private static func bundleIds(_ targets: [ReconcilerConfiguration.Target]) -> [String] {
        var seen: [String] = []
        for target in targets where !seen.contains(target.app.bundleId) { seen.append(target.app.bundleId) }
        return seen
    }

    // MARK: serve

    /// `--send-test`: each app and environment's TEST notification, production first, as
    /// `check-webhook` sends and follows it (within the shared budget when there is a database).
    private func testNotifications(logger: Logger) async -> [DoctorResult] {
        let targets: [CommandTarget]
        do {
            targets = try app.commandTargets(api: api).productionFirst()
        } catch {
            return []  // The configuration's own failure is the config check's.
        }
        var results: [DoctorResult] = []
        for target in targets {
            let outcome: Result<String, any Error>
            do {
                outcome = .success(try await database.checkWebhook(target, timeout: timeout, logger: logger))
            } catch {
                outcome = .failure(error)
            }
            results.append(Doctor.testNotification(target.app, outcome: outcome))
        }
        return results
    }

    /// `<origin of notificationURL>/health` of each distinct `notificationURL`.
    private func serveHealth(_ targets: [ReconcilerConfiguration.Target]) async -> [DoctorResult] {
        var results: [DoctorResult] = []
        var seen: Set<String> = []
        for target in targets {
            guard let url = target.notificationURL, var components = URLComponents(string: url), seen.insert(url).inserted else { continue }
            let several = Set(targets.compactMap(\.notificationURL)).count > 1
            components.path = "/health"
            components.query = nil
            components.fragment = nil
            guard let health = components.string else { continue }
            let request = HTTPClientRequest(url: health)
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
                _ = try? await response.body.collect(upTo: 64 * 1024)
                results.append(
                    Doctor.serveHealth(url: health, app: several ? target.app.bundleId : nil, answered: Int(response.status.code), error: nil))
            } catch {
                results.append(Doctor.serveHealth(url: health, app: several ? target.app.bundleId : nil, answered: nil, error: "\(type(of: error))"))
            }
        }
        return results
    }
}
