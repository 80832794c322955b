import Foundation
import UnixSignals

/// Runs `body` until it returns, or until SIGTERM or SIGINT cancels it (then `nil`): for what a
/// long-running command waits on before its service group handles the signals (the first connection
/// to the database, for up to `--database-timeout`), so that a signal then ends it as one during its
/// work would. Call it only right before such a group: afterwards the signals stay with Dispatch
/// (whose handler must not be replaced: a later group's sources would never fire), so one that
/// arrives before the group runs is lost, as after a group has ended.
///
/// ```swift
/// guard try await untilSignalled({ try await settings.checkConnection(within: timeout, logger: logger) }) != nil else {
///     throw ReconcilerError.interruption
/// }
/// ```
func untilSignalled<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    // Trapped before `body` starts: a signal as soon as it waits is not lost to the default action.
    let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            for await _ in signals { return nil }
            // The sequence ends only when cancelled: `body` returned first.
            throw CancellationError()
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
