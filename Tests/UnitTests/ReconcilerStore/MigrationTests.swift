import AppStoreServer
import Foundation
import Reconciler
import TestSupport
import Testing

@testable import ReconcilerStore

/// The migrations the binary embeds.
@Suite struct MigrationTests {
    static let migrationsDirectory = Repository.root.appendingPathComponent("migrations").path

    @Test func theEmbeddedMigrationsAreTheFilesInMigrations() throws {
        let files = try Migration.load(directory: Self.migrationsDirectory)
        let embedded = Migration.embedded
        #expect(!files.isEmpty)
        #expect(files == embedded, "the EmbedMigrations plugin embeds migrations/ at build time")
    }

}
