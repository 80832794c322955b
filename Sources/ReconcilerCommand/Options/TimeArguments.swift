public import ArgumentParser
import ReconcilerShared
import ReconcilerStore

// Times, durations and other typed values are read once, where the command line is parsed: a command holds instants
// and lengths, never their text, and a value that is not one fails parsing with ArgumentParser's
// message naming the option (exit 1, a usage error).

/// `T`: strict ISO 8601 with a zone (2026-11-20T03:10:00Z), UNIX milliseconds, `now`, or `now-6h`.
/// Not `ExpressibleByArgument`: every time option reads its value with
/// `@Option(..., transform: Timestamp.argument)`, whose refusal says what is wrong and lists the
/// accepted forms (ArgumentParser prints it after "The value '…' is invalid for '--start <T>'").
extension Timestamp {
    static func argument(_ text: String) throws -> Timestamp {
        do {
            return try parse(text)
        } catch {
            throw ValidationError(error.problem + "; a time is " + acceptedForms)
        }
    }
}

/// `purchase` or `notification` (`changes --kind`).
extension PurchaseStore.FeedKind: ExpressibleByArgument {}

/// `90s`, `45m`, `6h`, `7d`, `250ms`: a number and its unit.
extension Duration: @retroactive ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { operatorText }
}
