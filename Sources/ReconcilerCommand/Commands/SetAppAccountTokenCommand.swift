import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared

struct SetAppAccountTokenCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "set-app-account-token",
        abstract: "Set the app account token (the app's user ID) of one purchase at Apple, then read it again.",
        discussion: """
            Calls Set App Account Token for the purchase's original transaction ID (the token goes on its \
            latest transaction and renewal info and later renewals, not on past transactions), out of the \
            app's shared request budget, then reads the customer again as `repair` does, so `export` shows \
            the token Apple now returns; if Apple's answer does not show it yet, it says so (the next read will).

            Before calling, it checks that the token is a UUID and, for a purchase the database knows, that \
            the ID is its original transaction ID and that it was not shared through Family Sharing. Without \
            --environment, an ID Apple does not know in production is tried in the sandbox.

            Exit codes: 0 set; 1 bad input, or Apple refused it (its errorCode and name are shown: 4000006 \
            InvalidTransactionIdError, 4000183 InvalidAppAccountTokenUUIDError, 4000185 \
            FamilyTransactionNotSupportedError, 4000187 TransactionIdIsNotOriginalTransactionIdError, 4000048 \
            AppTransactionIdNotSupportedError, 4040005 OriginalTransactionIdNotFoundError); 2 rate limited or \
            Apple failing (run it again); 4 set, but the read after it needs a person.

              reconciler set-app-account-token --original-transaction-id 2000000123456789 \\
                  --app-account-token 7e3fb20b-4cdb-47cc-936d-99d65f608138
            """)

    @Option(help: ArgumentHelp("The purchase's original transaction ID.", valueName: "id")) var originalTransactionId: String
    @Option(help: ArgumentHelp("The UUID to set as the purchase's appAccountToken.", valueName: "uuid")) var appAccountToken: String

    @OptionGroup var options: AppleOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let (id, token) = try AppAccountTokenSetter.parse(originalTransactionId: originalTransactionId, appAccountToken: appAccountToken)
        let targets = try app.loadTargets(api: api).targets.productionFirst()
        guard Set(targets.map(\.app.bundleId)).count == 1 else {
            throw ReconcilerError.configuration(
                "several apps are configured (\(Set(targets.map(\.app.bundleId)).sorted().joined(separator: ", "))): choose one with --app")
        }
        for (index, target) in targets.enumerated() {
            do {
                let outcome = try await set(id: id, token: token, target: target, logger: logger)
                print(outcome.humanSummary())
                if let ending = outcome.reread.ending { throw ending }
                return
            } catch let error as ReconcilerError where error.code == .unknownTransactionId && index + 1 < targets.count {
                logger.info("not found in \(target.app.environment.rawValue); trying \(targets[index + 1].app.environment.rawValue)")
            }
        }
    }

    private func set(id: String, token: String, target: CommandTarget, logger: Logger) async throws -> AppAccountTokenSetter.Outcome {
        let (verifier, client) = (target.verifier, target.client)
        let sharing = [
            target.sharing([.setAppAccountToken, .getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses])
        ]
        let interrupted = ReconcilerError(.interrupted, "interrupted: run the same command again")
        return try await target.callingApple {
            try await database.runWork(logger: logger, sharing: sharing, interrupted: interrupted) { database in
                try await AppAccountTokenSetter(scope: target.scope, database: database, verifier: verifier, client: client)
                    .set(originalTransactionId: id, appAccountToken: token)
            }
        }
    }
}
