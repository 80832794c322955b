import AppStoreServer
import Crypto
import Foundation
import MockAppStore
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// The shared request budget seen from a real `reconciler`: a command that cannot join it calls no one.
@Suite struct SharedBudgetTests {

    /// A command that cannot join the shared budget (here: a database not migrated yet) calls
    /// Apple not once, and says what to do.
    @Test func aCommandThatCannotJoinCallsNoOne() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with(migrate: false) { db in
                try await MockAppStore.withRunning(.init(scenario: .init(seed: 61, customers: 2))) { mock, baseURL in
                    let key = directory.file("key.p8")
                    try P256PrivateKey().pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
                    let environment = [
                        "APP_STORE_BUNDLE_ID": mock.configuration.scenario.bundleId, "APP_STORE_ENVIRONMENT": "sandbox",
                        "APP_STORE_KEY_ID": mock.configuration.keyId, "APP_STORE_ISSUER_ID": mock.configuration.issuerId,
                        "APP_STORE_PRIVATE_KEY_PATH": key, "APP_STORE_API_BASE_URL": baseURL, "DATABASE_URL": db.url,
                    ]
                    let result = try await runProcess("reconciler", ["detect-outage", "--since", "1d"], environment: environment)
                    #expect(result.status == 1, "\(result.stderr)")
                    #expect(result.stderr.contains("reconciler migrate"), "\(result.stderr)")
                    #expect(mock.statisticsSnapshot.requests.values.reduce(0, +) == 0, "\(mock.statisticsSnapshot.requests)")
                }
            }
        }
    }

}
