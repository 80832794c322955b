package import Logging
import Synchronization

/// A log handler that keeps every message, for tests that check what was (not) logged.
///
/// ```swift
/// let records = RecordingLogHandler.Records()
/// let logger = Logger(label: "test") { _ in RecordingLogHandler(records) }
/// #expect(!records.messages.contains { $0.contains("warning text") })
/// ```
package struct RecordingLogHandler: LogHandler {
    package final class Records: Sendable {
        private let lines = Mutex<[String]>([])
        package init() {}
        package var messages: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    private let records: Records
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .trace

    package init(_ records: Records) {
        self.records = records
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        // The metadata too, so a test can check a secret reached no part of a message.
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        records.append("\(event.level) \(event.message)" + merged.keys.sorted().map { " \($0)=\(merged[$0]!)" }.joined())
    }
}
