import Foundation
import TestSupport
import Testing

/// The README as a user reads it.
@Suite struct ReadmeTests {
    /// The README's sample outputs (the drill, a run's report) are generated from a real run of the
    /// drill (`jobs/dev/readme-samples`), not typed; this runs the drill again on the tests' build
    /// and fails when a sample no longer matches what the code prints (figures, times and ids
    /// masked; lines and labels compared) or when the drill printed a warning.
    @Test func theSamplesAreWhatTheCodePrints() async throws {
        let script = Repository.root.appendingPathComponent("jobs/dev/readme-samples").path
        let result = try await runProcess(
            "/usr/bin/env", ["bash", script, "--check"], environment: ["DRILL_BIN": Executables.directory.path], timeout: .seconds(1200))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr.suffix(4000))")
    }
}
