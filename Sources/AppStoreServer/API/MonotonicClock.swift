/// The time that waits are judged by — the rate limiter's turns, `Retry-After` closures,
/// backoffs, the reconciler's leases and its shared budget — injected so that tests move it by
/// hand (the tests' `ManualClock`, in TestSupport) instead of waiting for it. An instant is the time since the clock's
/// origin; instants of different clocks do not compare.
///
/// ```swift
/// let clock: any MonotonicClock = .system
/// let expires = clock.now + .seconds(5)
/// try await clock.sleep(until: expires)
/// ```
public protocol MonotonicClock: Sendable {
    /// Now: the time since this clock's origin.
    var now: Duration { get }
    /// Returns once `deadline` has come (at once when it has); throws `CancellationError` when
    /// the task is cancelled first.
    func sleep(until deadline: Duration) async throws
}

extension MonotonicClock {
    /// Returns after `duration` of this clock.
    public func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}

/// The process's monotonic clock (`ContinuousClock`): it does not jump with the wall clock.
public struct SystemClock: MonotonicClock {
    /// Every system clock of the process counts from the same origin.
    private static let origin = ContinuousClock.now

    public init() {}

    public var now: Duration { ContinuousClock.now - Self.origin }

    public func sleep(until deadline: Duration) async throws {
        try await ContinuousClock().sleep(until: Self.origin + deadline)
    }
}

extension MonotonicClock where Self == SystemClock {
    /// The process's monotonic clock.
    public static var system: SystemClock { SystemClock() }
}
