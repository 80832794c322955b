import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerStore

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Verify one signed value (notification, transaction or renewal info) and print it decoded.",
        discussion: """
            Reads a JWS from the argument, or from standard input with "-" (a webhook body \
            {"signedPayload": ...} is accepted too). Checks the signature and the chain to the trusted \
            roots at the payload's signedDate; with a configuration file or APP_STORE_BUNDLE_ID, also that it \
            belongs to a configured app and environment. \
            A notification's nested signedTransactionInfo and signedRenewalInfo are verified and shown. \
            Exit 0 when genuine; 3 and the reason when not.

            --notification UUID or --transaction ID inspects the value stored in the database (DATABASE_URL) \
            instead, rebuilt byte for byte from what is stored; with --print-jws, only that JWS is printed, \
            for another tool (Apple's own libraries) to check. A pruned payload cannot be shown: exit 1.

              reconciler inspect eyJhbGciOiJFUzI1NiIsIng1YyI6...
              pbpaste | reconciler inspect -
              reconciler inspect --notification 8c3e1f0a-...
              reconciler inspect --transaction 2000001024998954 --print-jws > t.jws
            """)

    @Argument(help: ArgumentHelp("The JWS, or - to read standard input.", valueName: "jws"))
    var jws: String = "-"

    @Option(help: ArgumentHelp("Inspect this stored notification, rebuilt from the database.", valueName: "uuid"))
    var notification: String?

    @Option(help: ArgumentHelp("Inspect the stored version of this transaction, rebuilt from the database.", valueName: "id"))
    var transaction: String?

    @Flag(help: "With --notification or --transaction: print only the stored JWS, rebuilt, and check nothing.")
    var printJWS = false

    @OptionGroup var app: AppOptions
    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard notification == nil || transaction == nil else { throw ValidationError("give --notification or --transaction, not both") }
        guard !printJWS || notification != nil || transaction != nil else {
            throw ValidationError("--print-jws goes with --notification or --transaction")
        }
        guard jws == "-" || (notification == nil && transaction == nil) else {
            throw ValidationError("give a JWS or --notification/--transaction, not both")
        }
    }

    /// The stored value `--notification` or `--transaction` names, rebuilt.
    private func stored() async throws -> String? {
        guard notification != nil || transaction != nil else { return nil }
        let (notification, transaction) = (self.notification, self.transaction)
        let logger = {
            var logger = Logger(label: "reconciler")
            // Only what stops it: the output is the value.
            logger.logLevel = .error
            return logger
        }()
        let value: StoredSignedValue? = try await database.withCurrentSchema(logger: logger) { database in
            return try await database.transaction { connection in
                if let notification {
                    return try await NotificationLog(logger: logger).storedPayloads([notification], headers: HeaderBook(), on: connection)[
                        notification]
                }
                let versions = try await PurchaseStore(logger: logger).storedTransactions(
                    transactionId: transaction ?? "", headers: HeaderBook(), on: connection)
                return versions.first?.value
            }
        }
        let name = notification.map { "notification \($0)" } ?? "transaction \(transaction ?? "")"
        switch value {
        case .signed(let jws, _)?: return jws
        case .pruned?: throw ReconcilerError.configuration("the signed payload of \(name) was pruned (prune --payloads-older-than)")
        case .incomplete?:
            throw ReconcilerError(.payloadUnavailable, "the stored parts of \(name) cannot be put together (run reconciler verify-stored)")
        case nil: throw ReconcilerError.configuration("no \(name) is stored")
        }
    }

    func run() async throws {
        var input = jws
        if let stored = try await stored() {
            if printJWS {
                print(stored)
                return
            }
            input = stored
        } else if input == "-" {
            input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        input = input.trimmingCharacters(in: .whitespacesAndNewlines)
        if input.hasPrefix("{"), let body = try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(input.utf8)),
            let payload = body.signedPayload
        {
            input = payload
        }
        guard !input.isEmpty else { throw ReconcilerError.configuration("no JWS given (pass it as an argument, or - and standard input)") }

        // Without an app configured, only the signature and chain can be judged.
        let appChecks = app.resolvedBundleId != nil || app.configurationFile != nil
        let verifiers =
            try appChecks
            ? app.verifyingTargets().verifiers
            : [
                SignedDataVerifier(
                    configuration: .init(
                        rootCertificates: try app.roots((app.rootCertificates ?? Env.value("APP_STORE_ROOT_CERTIFICATES")).map(AppOptions.paths)),
                        bundleId: "-", appAppleId: 0, environment: try app.resolvedEnvironment))
            ]
        do {
            // The value belongs to the first configured app and environment whose checks it passes.
            var verified: (SignedDataVerifier, InspectedValue)?
            var firstError: (any Error)?
            for candidate in verifiers where verified == nil {
                do {
                    verified = (candidate, try await candidate.inspect(input, checkingApp: appChecks))
                } catch {
                    firstError = firstError ?? error
                }
            }
            guard let (verifier, value) = verified else { throw firstError ?? ReconcilerError.configuration("no app to check against") }
            var object = try JSONSerialization.jsonObject(with: Data(value.json)) as? [String: Any] ?? [:]
            // A notification's nested values are verified too, each once, and shown decoded.
            if value.kind == .notification, var data = object["data"] as? [String: Any] {
                for key in ["signedTransactionInfo", "signedRenewalInfo"] {
                    guard let nested = data[key] as? String else { continue }
                    let decoded = try await verifier.inspect(nested, checkingApp: appChecks)
                    data[key.replacingOccurrences(of: "signed", with: "decoded")] = try JSONSerialization.jsonObject(with: Data(decoded.json))
                }
                object["data"] = data
            }
            let output: [String: Any] = [
                "kind": value.kind.rawValue, "genuine": true, "appChecked": appChecks, "payload": object,
            ]
            let data = try JSONSerialization.data(withJSONObject: output, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
            if !appChecks {
                FileHandle.standardError.write(Data("note: APP_STORE_BUNDLE_ID is not set, so the app and environment were not checked\n".utf8))
            }
        } catch let error as VerificationError {
            throw ReconcilerError.rejected("rejected: \(error.reason.rawValue): \(error.detail)")
        }
    }
}
