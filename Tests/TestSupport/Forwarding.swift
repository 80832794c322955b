import AppStoreServer
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerStore

extension TestApp {
    /// Records `count` live SUBSCRIBED notifications of new purchases (`<purchasePrefix>-<uuid>`)
    /// through the handler, each queued for forwarding to `url`; returns their UUIDs.
    package func recordForwarded(_ count: Int, to url: String, in db: TestDatabase, purchasePrefix: String) async throws -> [String] {
        let handler = try handler(db)
        var uuids: [String] = []
        for index in 0..<count {
            let uuid = UUID().uuidString.lowercased()
            let signed = start + 86_400_000 + Int64(index)
            let payload = try notification(
                .subscribed, .initialBuy, uuid: uuid, signedDate: signed,
                transaction: subscription(original: "\(purchasePrefix)-\(uuid)", period: 0, signedDate: signed), status: .active)
            _ = try await handler.handle(signedPayload: payload, source: .webhook, forwarding: .init(target: ForwardingTarget(url: url)))
            uuids.append(uuid)
        }
        return uuids
    }
}

extension TestDatabase {
    /// Runs `reconciler` against this database (warnings and errors only in its log).
    package func reconciler(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess("reconciler", arguments, environment: ["DATABASE_URL": url, "LOG_LEVEL": "warning"])
    }
}
