import Foundation
import TestSupport
import Testing

/// `DATABASE_PREPARED_STATEMENTS=off`, for a pool that cannot keep named prepared statements
/// (PgBouncer in transaction mode before 1.21): the same run recovers the same window.
@Suite struct PreparedStatementsOffTests {
    @Test func aRunWithoutPreparedStatementsRecoversTheWindow() async throws {
        try await Rehearsal.with(customers: 30, seed: 91) { rehearsal in
            let window = ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd]
            // A value other than on or off is refused before anything runs.
            let refused = try await rehearsal.reconciler(window, environment: ["DATABASE_PREPARED_STATEMENTS": "sometimes"])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("DATABASE_PREPARED_STATEMENTS"), "\(refused.stderr)")
            let run = try await rehearsal.reconciler(window, environment: ["DATABASE_PREPARED_STATEMENTS": "off"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }
}
