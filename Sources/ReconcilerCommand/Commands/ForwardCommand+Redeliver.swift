import AppStoreServer
import ArgumentParser
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `forward --redeliver`: a window of stored notifications queued again for the app's webhooks.
extension ForwardCommand {
    /// The options of `--redeliver`, checked before anything is read.
    func validateRedelivery() throws {
        guard redeliver else {
            if since != nil || until != nil || !types.isEmpty || target != nil || dryRun {
                throw ValidationError("--since, --until, --type, --target and --dry-run go with --redeliver")
            }
            return
        }
        if once || retryFailed || drainTimeout != nil {
            throw ValidationError("--redeliver only queues: run `forward --once` (or the worker) after it")
        }
        guard let since, let until else { throw ValidationError("--redeliver needs --since and --until") }
        if since >= until { throw ValidationError("--since must be before --until") }
        if let bad = NotificationTypeFilter.malformed(types) {
            throw ValidationError("--type \(bad): give TYPE or TYPE/SUBTYPE, as the run report prints them (REFUND, DID_RENEW/BILLING_RECOVERY)")
        }
    }

    /// For each configured app and environment (`--app`, `--environment`) and each of its webhooks
    /// (`--target`: the one of that name), queues again the notifications of the window.
    func redeliverWindow() async throws {
        guard app.configurationFile != nil else {
            throw ReconcilerError.configuration("--redeliver needs the configuration file (--config or RECONCILER_CONFIG): it names the apps")
        }
        let configuration = try app.configuration(requireAppAppleId: false)
        let apps = try app.targets(in: configuration)
        let plan = try forwarding.plan(forwardTo: forwardTo, configuration: configuration, targets: apps)
        let chosen = apps.flatMap { target in plan.webhooks(for: target.app).map { (app: target.app, webhook: $0) } }
            .filter { target == nil || $0.webhook.name == target }
        guard !chosen.isEmpty else {
            let names = Set(apps.flatMap { plan.webhooks(for: $0.app).compactMap(\.name) }).sorted()
            throw ReconcilerError.configuration(
                target.map {
                    "no forwardTo target is named \($0) for the chosen apps (" + (names.isEmpty ? "none has a name" : names.joined(separator: ", "))
                        + ")"
                } ?? "the chosen apps forward nowhere: give them forwardTo in the configuration file")
        }
        guard let since, let until else { throw ValidationError("--redeliver needs --since and --until") }
        let (window, types, dryRun) = (TimeWindow(start: since, end: until), NotificationTypeFilter(self.types), self.dryRun)
        let results = try await database.runWork(logger: logging.makeLogger()) { database in
            let queue = ForwardQueue(database: database)
            var results: [(app: AppTarget, webhook: ForwardingWebhook, redelivery: ForwardQueue.Redelivery)] = []
            for (app, webhook) in chosen {
                let redelivery = try await queue.redeliver(app: app, route: webhook.route, window: window, types: types, dryRun: dryRun)
                results.append((app, webhook, redelivery))
            }
            return results
        }
        var listed = 0
        for (app, webhook, result) in results {
            print(
                "redeliver\(dryRun ? " (dry run)" : ""): \(app) to \(webhook.name ?? webhook.url.description): "
                    + "\(result.queued) \(dryRun ? "would be queued" : "queued"), "
                    + "\(result.notSent.count) not sent (payload pruned or does not rebuild)")
            for notSent in result.notSent where listed < 1_000 {
                print("  not sent: \(notSent.notificationUUID) (\(notSent.reason))")
                listed += 1
            }
        }
        let notListed = results.reduce(0) { $0 + $1.redelivery.notSent.count } - listed
        if notListed > 0 { print("  and \(notListed) more not sent") }
    }
}
