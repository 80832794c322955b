package import AppStoreServer
package import Foundation
import Logging
import ReconcilerDomain
package import ReconcilerStore

/// `reconciler verify-stored`: rebuilds every stored signed value (notifications with their nested
/// transaction and renewal info, transactions) from what the database holds and verifies it as the
/// handler did when it arrived (signature, chain to the trusted roots at its `signedDate`, the app
/// and environment). After Apple's history retention the stored JWS is the only evidence that a
/// purchase happened, so a value that no longer verifies, or no longer hashes to what was stored,
/// or no longer names its row's notification or transaction, is reported. Pruned payloads are
/// counted apart (nothing is left to verify); they are not failures.
///
/// Rows are read in batches of short transactions, in key order, and verified with no transaction
/// open; memory stays flat.
///
/// ```swift
/// let report = try await StoredPayloadVerifier(database: database, verifiers: verifiers).verify(since: nil)
/// if !report.failures.isEmpty { throw ReconcilerError(.storedPayloadNotGenuine, "...") }
/// ```
package struct StoredPayloadVerifier: Sendable {
    /// How many values, of one kind, were found in which state.
    package struct Counts: Sendable, Codable, Hashable {
        /// Rebuilt and verified.
        package var verified = 0
        /// Of the verified: stored whole, because their parts would not rebuild them exactly.
        package var storedWhole = 0
        /// Of the verified: written before migration 0015 and not compacted yet (`compact-payloads`).
        package var legacy = 0
        /// Of the verified transactions: stored inside the notification they came in.
        package var insideNotification = 0
        /// Removed by `prune --payloads-older-than`: not checked.
        package var pruned = 0
        /// Rebuilt but not genuine, or not what the row says: each is in ``Report/failures``.
        package var failed = 0
        /// The bytes of the verified values as Apple signed them.
        package var signedBytes = 0
    }

    /// A stored value that does not verify.
    package struct Failure: Sendable, Codable, Hashable {
        package enum Kind: String, Sendable, Codable, Hashable {
            case notification, transaction
        }

        package var kind: Kind
        /// The notification UUID or the transaction ID.
        package var id: String
        package var bundleId: String
        package var environment: AppStoreEnvironment
        /// Why: a ``VerificationError/Reason`` (its raw value), or `HASH_MISMATCH`, `ROW_MISMATCH` or `INCOMPLETE`.
        package var reason: String
        package var detail: String
    }

    package struct Report: Sendable, Codable, Hashable {
        package var since: Date?
        package var notifications = Counts()
        package var transactions = Counts()
        /// Apps whose values were verified without their app and environment checks (no configuration names them).
        package var unconfiguredApps: [String] = []
        package var failures: [Failure] = []
    }

    let database: Database
    /// The configured apps' verifiers; a value of another app is checked for its signature and chain only.
    let verifiers: [SignedDataVerifier]
    let batchSize: Int

    package init(database: Database, verifiers: [SignedDataVerifier], batchSize: Int = 500) {
        self.database = database
        self.verifiers = verifiers
        self.batchSize = batchSize
    }

    /// Verifies every value stored (or written) at or after `since`; `progress` hears the report so far after each batch.
    package func verify(since: Date?, progress: @Sendable (Report) -> Void = { _ in }) async throws -> Report {
        var report = Report(since: since)
        var unconfigured = Set<String>()
        let headers = HeaderBook()
        let log = NotificationLog(logger: database.logger)
        var cursor = ""
        while true {
            let (after, batchSize) = (cursor, self.batchSize)
            let batch = try await database.transaction { transaction in
                try await log.storedNotifications(after: after, receivedSince: since, limit: batchSize, headers: headers, on: transaction)
            }
            for row in batch {
                await check(row, into: &report, unconfigured: &unconfigured)
            }
            progress(report)
            guard batch.count == batchSize, let last = batch.last else { break }
            cursor = last.notificationUUID
        }
        let store = PurchaseStore(logger: database.logger)
        var key = PurchaseStore.TransactionKey.first
        while true {
            let (after, batchSize) = (key, self.batchSize)
            let batch = try await database.transaction { transaction in
                try await store.storedTransactions(after: after, updatedSince: since, limit: batchSize, headers: headers, on: transaction)
            }
            for row in batch {
                await check(row, into: &report, unconfigured: &unconfigured)
            }
            progress(report)
            guard batch.count == batchSize, let last = batch.last else { break }
            key = last.key
        }
        report.unconfiguredApps = unconfigured.sorted()
        return report
    }

    /// The verifier of an app and environment, when configured.
    private func verifier(bundleId: String, environment: AppStoreEnvironment) -> SignedDataVerifier? {
        verifiers.first { $0.configuration.bundleId == bundleId && $0.configuration.environment == environment }
    }

    /// One stored value as the check reads it: which row it is, where its counts go, and how its
    /// own signature is checked.
    private struct Checked {
        var kind: Failure.Kind
        var id: String
        var bundleId: String
        var environment: AppStoreEnvironment
        var counts: WritableKeyPath<Report, Counts>
        var value: StoredSignedValue
        var payloadSHA256: [UInt8]?
        /// What is missing when the value's parts cannot be put together.
        var incompleteDetail: String
    }

    /// Puts a stored value together and verifies it with `verify` (which returns why the verified
    /// value does not match its row, or nil), then checks its hash. Counts a pruned or failed value
    /// and returns nil; returns the value that verified.
    private func check(
        _ row: Checked, into report: inout Report, verify: (String) async throws -> String?
    ) async -> String? {
        func fail(_ reason: String, _ detail: String) -> String? {
            report[keyPath: row.counts].failed += 1
            report.failures.append(
                Failure(kind: row.kind, id: row.id, bundleId: row.bundleId, environment: row.environment, reason: reason, detail: detail))
            return nil
        }
        let jws: String
        switch row.value {
        case .pruned:
            report[keyPath: row.counts].pruned += 1
            return nil
        case .incomplete:
            return fail("INCOMPLETE", row.incompleteDetail)
        case .signed(let value, _):
            jws = value
        }
        do {
            if let mismatch = try await verify(jws) {
                return fail("ROW_MISMATCH", mismatch)
            }
            // Genuine, but not the value that was stored (another genuine value put in its place).
            if let stored = row.payloadSHA256, JWSParts.sha256(jws) != stored {
                return fail("HASH_MISMATCH", "the value verifies but does not hash to the SHA-256 stored with it")
            }
        } catch let error as VerificationError {
            return fail(error.reason.rawValue, error.detail)
        } catch {
            return fail("INVALID_PAYLOAD", "\(error)")
        }
        report[keyPath: row.counts].verified += 1
        report[keyPath: row.counts].signedBytes += jws.utf8.count
        return jws
    }

    private func check(_ row: NotificationLog.StoredNotification, into report: inout Report, unconfigured: inout Set<String>) async {
        let checked = Checked(
            kind: .notification, id: row.notificationUUID, bundleId: row.bundleId, environment: row.environment, counts: \.notifications,
            value: row.value, payloadSHA256: row.payloadSHA256,
            incompleteDetail: "the stored parts cannot be put together (a header or a column is missing)")
        let verifier = verifier(bundleId: row.bundleId, environment: row.environment)
        if verifier == nil, case .signed = row.value { unconfigured.insert("\(row.bundleId) (\(row.environment))") }
        let verified = await check(checked, into: &report) { jws in
            let decoded: ResponseBodyV2DecodedPayload
            if let verifier {
                decoded = try await verifier.verifyAndDecodeNotification(jws)
                _ = try await verifier.verifySubscription(
                    signedTransactionInfo: decoded.data?.signedTransactionInfo, signedRenewalInfo: decoded.data?.signedRenewalInfo)
            } else {
                decoded = try await signatureOnly(jws, as: ResponseBodyV2DecodedPayload.self)
                for nested in [decoded.data?.signedTransactionInfo, decoded.data?.signedRenewalInfo].compactMap({ $0 }) {
                    _ = try await signatureOnly(nested, as: SignedDateOnly.self)
                }
            }
            guard decoded.notificationUUID == row.notificationUUID, decoded.signedDate == row.signedDate,
                decoded.notificationType?.rawValue == row.notificationType
            else { return "the value verifies but names another notification, type or signedDate than its row" }
            return nil
        }
        guard verified != nil else { return }
        if row.form == .whole { report.notifications.storedWhole += 1 }
        if row.form == .legacy { report.notifications.legacy += 1 }
    }

    private func check(_ row: PurchaseStore.StoredTransaction, into report: inout Report, unconfigured: inout Set<String>) async {
        let checked = Checked(
            kind: .transaction, id: row.key.transactionId, bundleId: row.key.bundleId, environment: row.key.environment,
            counts: \.transactions, value: row.value, payloadSHA256: row.payloadSHA256,
            incompleteDetail: "the stored parts cannot be put together (a header, a column or its notification is missing)")
        let verifier = verifier(bundleId: row.key.bundleId, environment: row.key.environment)
        if verifier == nil, case .signed = row.value { unconfigured.insert("\(row.key.bundleId) (\(row.key.environment))") }
        let verified = await check(checked, into: &report) { jws in
            let decoded =
                if let verifier {
                    try await verifier.verifyAndDecodeTransaction(jws)
                } else {
                    try await signatureOnly(jws, as: JWSTransactionDecodedPayload.self)
                }
            guard decoded.transactionId == row.key.transactionId, decoded.signedDate == row.signedDate else {
                return "the value verifies but names another transaction or signedDate than its row"
            }
            return nil
        }
        guard verified != nil else { return }
        switch row.form {
        case .whole: report.transactions.storedWhole += 1
        case .legacy: report.transactions.legacy += 1
        case .inNotification: report.transactions.insideNotification += 1
        case .parts, .pruned: break
        }
    }

    private struct SignedDateOnly: Decodable {
        var signedDate: Int64?
    }

    /// The signature and chain only, for a value of an app no configuration names.
    private func signatureOnly<Payload: Decodable>(_ jws: String, as type: Payload.Type) async throws -> Payload {
        guard let verifier = verifiers.first else {
            throw VerificationError(.untrustedRoot, "no verifier is configured")
        }
        let json = try await verifier.verifySignatureAndDecodePayload(jws)
        do {
            return try JSONDecoder().decode(Payload.self, from: Data(json))
        } catch {
            throw VerificationError(.invalidPayload, "the payload is not a \(Payload.self): \(error)")
        }
    }
}
