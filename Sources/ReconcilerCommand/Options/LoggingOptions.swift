import ArgumentParser
import Foundation
import Logging

struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Log level: trace, debug, info, notice, warning, error (env LOG_LEVEL).", valueName: "level"))
    var logLevel: String?

    @Option(name: .long, help: ArgumentHelp("Log format: text or json (env LOG_FORMAT).", valueName: "format"))
    var logFormat: String?

    @Flag(name: .long, help: "Also log what the PostgreSQL client logs of its own: each connection attempt and its raw error.")
    var verbose = false

    func validate() throws {
        if let level = logLevel ?? Env.value("LOG_LEVEL"), Logger.Level(rawValue: level.lowercased()) == nil {
            throw ValidationError("unknown log level \(level); use trace, debug, info, notice, warning or error")
        }
        if let format = logFormat ?? Env.value("LOG_FORMAT"), !["text", "json"].contains(format.lowercased()) {
            throw ValidationError("unknown log format \(format); use text or json")
        }
    }

    /// Whether logs are JSON lines (`--log-format json`, LOG_FORMAT=json).
    var json: Bool { (logFormat ?? Env.value("LOG_FORMAT") ?? "text").lowercased() == "json" }

    /// Sets up swift-log once for the process (logs go to stderr) and returns a logger.
    func makeLogger(label: String = "reconciler") -> Logger {
        let level = Logger.Level(rawValue: (logLevel ?? Env.value("LOG_LEVEL") ?? "info").lowercased()) ?? .info
        LoggingBootstrap.once(json: json, verbose: verbose)
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// The logger for what the PostgreSQL client logs of its own (its pool's connection attempts,
    /// their raw errors): as `logger` with `--verbose` or at `debug` and below, otherwise only its
    /// warnings. A database that cannot be reached is said once, in the command's own words.
    static func databaseClientLogger(_ logger: Logger) -> Logger {
        var client = logger
        if !LoggingBootstrap.verbose, logger.logLevel > .debug { client.logLevel = max(logger.logLevel, .warning) }
        return client
    }
}

enum LoggingBootstrap {
    nonisolated(unsafe) private static var done = false
    /// `--verbose`, set with the bootstrap: like it, one setting for the whole process.
    nonisolated(unsafe) private(set) static var verbose = false

    static func once(json: Bool, verbose: Bool = false) {
        guard !done else { return }
        done = true
        self.verbose = verbose
        LoggingSystem.bootstrap { label in
            json ? JSONLogHandler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
    }
}

/// One JSON object per line on stderr: time, level, label, message and metadata.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: String] = [
            "time": ISO8601DateFormatter().string(from: Date()), "level": event.level.rawValue,
            "label": label, "message": event.message.description,
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = value.description
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        if var data = try? encoder.encode(object) {
            data.append(0x0A)
            FileHandle.standardError.write(data)
        }
    }
}
