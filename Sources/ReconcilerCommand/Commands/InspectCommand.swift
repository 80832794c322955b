import AppStoreServer
import ArgumentParser
import Foundation

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Verify one signed value (notification, transaction or renewal info) and print it decoded.",
        discussion: """
            Reads a JWS from the argument, or from standard input with "-" (a webhook body \
            {"signedPayload": ...} is accepted too). Checks the signature and the chain to the trusted \
            roots at the payload's signedDate; with APP_STORE_BUNDLE_ID set, also the app and environment. \
            A notification's nested signedTransactionInfo and signedRenewalInfo are verified and shown. \
            Exit 0 when genuine; 3 and the reason when not.

              reconciler inspect eyJhbGciOiJFUzI1NiIsIng1YyI6...
              pbpaste | reconciler inspect -
            """)

    @Argument(help: ArgumentHelp("The JWS, or - to read standard input.", valueName: "jws"))
    var jws: String = "-"

    @OptionGroup var app: AppOptions

    func run() async throws {
        var input = jws
        if input == "-" {
            input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        input = input.trimmingCharacters(in: .whitespacesAndNewlines)
        if input.hasPrefix("{"), let body = try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(input.utf8)),
            let payload = body.signedPayload
        {
            input = payload
        }
        guard !input.isEmpty else { throw CommandError.configuration("no JWS given (pass it as an argument, or - and standard input)") }

        // Without a bundle id, only the signature and chain can be judged.
        let appChecks = app.resolvedBundleId != nil
        let verifier =
            try appChecks
            ? app.verifier()
            : SignedDataVerifier(
                configuration: .init(
                    rootCertificates: try app.roots(), bundleId: "-", appAppleId: 0, environment: try app.resolvedEnvironment))
        do {
            let value = try await verifier.inspect(input, checkingApp: appChecks)
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
            throw CommandError.rejected("rejected: \(error.reason.rawValue): \(error.detail)")
        }
    }
}
