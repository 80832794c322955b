import Foundation

/// Standard output for a command whose reader may go away (`changes | head -1`, a consumer that
/// died): a write to a closed pipe, or a reader seen gone while nothing is written, ends the
/// command quietly instead of with a "Broken pipe" error or a connection held open until the next
/// line.
///
/// ```swift
/// StandardOutput.ignoreBrokenPipeSignal()
/// try StandardOutput.write(line + "\n")   // throws StandardOutput.ReaderGone once the reader closed the pipe
/// ```
enum StandardOutput {
    /// The reader of standard output is gone: nothing written any more can be read.
    struct ReaderGone: Error {}

    /// Makes a write to a pipe without a reader fail with EPIPE instead of killing the process,
    /// so the command can end as it chooses.
    static func ignoreBrokenPipeSignal() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Prints `value` as `--json` prints: pretty, keys sorted, dates in ISO 8601 unless `dates`
    /// says otherwise.
    static func printJSON(
        _ value: some Encodable, escapingSlashes: Bool = true, dates: JSONEncoder.DateEncodingStrategy = .iso8601
    ) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapingSlashes ? [.prettyPrinted, .sortedKeys] : [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = dates
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// Writes `text` whole to standard output.
    /// - Throws: ``ReaderGone`` when the reader closed it (EPIPE); another write error as itself.
    static func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                Foundation.write(STDOUT_FILENO, buffer.baseAddress! + written, buffer.count - written)
            }
            if result >= 0 {
                written += result
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN:
                // A non-blocking descriptor (inherited so): wait until it takes more.
                var descriptor = pollfd(fd: STDOUT_FILENO, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 100)
            case EPIPE: throw ReaderGone()
            case let code: throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
            }
        }
    }

    /// Whether the reader of standard output is gone: a pipe whose read end was closed reports
    /// POLLERR, a socket whose peer went away POLLHUP. A file or a terminal reports neither.
    static var readerIsGone: Bool {
        var descriptor = pollfd(fd: STDOUT_FILENO, events: 0, revents: 0)
        guard poll(&descriptor, 1, 0) == 1 else { return false }
        return descriptor.revents & Int16(POLLERR | POLLHUP) != 0
    }

    /// Returns once the reader of standard output is gone, looking every `interval` (while a
    /// command writes nothing, this is how it learns that nobody reads); throws when cancelled.
    static func waitUntilReaderIsGone(checkingEvery interval: Duration) async throws {
        while !readerIsGone {
            try await Task.sleep(for: interval)
        }
    }
}
