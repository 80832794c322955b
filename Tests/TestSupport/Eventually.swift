/// Waits until `condition` holds, polling (tests wait for conditions, never for time); throws
/// after `timeout`, naming `what` it waited for.
///
/// ```swift
/// try await eventually("a committed page") { try await db.count("SELECT count(*) FROM run_shards WHERE pages_done > 0") > 0 }
/// ```
package func eventually(_ what: String, timeout: Duration = .seconds(120), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw ProcessFailure(description: "timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}
