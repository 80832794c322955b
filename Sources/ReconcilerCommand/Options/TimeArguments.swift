public import ArgumentParser
import ReconcilerShared
import ReconcilerStore

// Times, durations and other typed values are read once, where the command line is parsed: a command holds instants
// and lengths, never their text, and a value that is not one fails parsing with ArgumentParser's
// message naming the option (exit 1, a usage error).

/// `T`: ISO 8601 (2026-11-20T03:10:00Z), UNIX milliseconds, `now`, or `now-6h`.
extension Timestamp: ExpressibleByArgument {
    package init?(argument: String) { self.init(parsing: argument) }
}

/// `purchase` or `notification` (`changes --kind`).
extension PurchaseStore.FeedKind: ExpressibleByArgument {}

/// `90s`, `45m`, `6h`, `7d`, `250ms`, or plain milliseconds.
extension Duration: @retroactive ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { operatorText }
}
