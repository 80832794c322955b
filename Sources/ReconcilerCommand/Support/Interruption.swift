import UnixSignals

/// SIGINT or SIGTERM arrived.
struct Interrupted: Error {}

/// Runs `body`; SIGINT or SIGTERM cancels it (committed checkpoints stay, the rest rolls back).
func cancellingOnSignals<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) {
                throw Interrupted()
            }
            return nil
        }
        defer { group.cancelAll() }
        while let next = try await group.next() {
            if let result = next { return result }
        }
        throw Interrupted()
    }
}
