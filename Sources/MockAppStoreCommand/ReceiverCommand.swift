import ArgumentParser
import Foundation
import Logging
import MockAppStore
import ServiceLifecycle
import UnixSignals

/// `mock-appstore receiver`: the app's own notification handler, imitated, for `--forward-to`.
struct ReceiverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receiver",
        abstract: "Imitate the app's own webhook handler: acknowledge forwarded notifications and count them by notificationUUID.",
        discussion: """
            Takes POST {"signedPayload": "..."} on any path and answers 200, counting each notificationUUID it \
            acknowledged. GET /receiver/stats shows the counts; POST /receiver/behaviour {"status": 500} makes it \
            answer 500 until {"status": 200}. With RECEIVER_SECRET set (or --secret-file), a delivery without a \
            valid Reconciler-Signature header is refused with 401.

              mock-appstore receiver --port 9000 --secret-file hook.secret
              reconciler run --since-last --forward-to http://127.0.0.1:9000/notifications \\
                  --forward-secret-file hook.secret
            """)

    @Option(help: "Port to listen on (0 picks a free one, printed when listening).") var port: Int = 9000
    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"
    @Option(help: ArgumentHelp("A file holding the shared secret of Reconciler-Signature (env RECEIVER_SECRET).", valueName: "path"))
    var secretFile: String?
    @Option(help: "Answer the first N deliveries with 500, as an app that is down for a while.") var failFirst: Int = 0
    @Option(help: "Milliseconds to wait before each answer, as a slow app.") var delayMs: Int = 0

    func run() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        let logger = Logger(label: "mock-appstore-receiver")
        var secret = ProcessInfo.processInfo.environment["RECEIVER_SECRET"]
        if let secretFile {
            guard let text = try? String(contentsOfFile: secretFile, encoding: .utf8) else {
                throw ValidationError("--secret-file: cannot read \(secretFile)")
            }
            secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let host = self.host
        let receiver = AppWebhookReceiver(
            configuration: .init(host: host, port: port, secret: secret, failFirst: failFirst, delayMilliseconds: delayMs),
            onBound: { port in
                FileHandle.standardOutput.write(Data("receiver listening on http://\(host):\(port)/notifications\n".utf8))
            })
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: receiver)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
