package import MockAppStore

extension AppWebhookReceiver {
    /// The app's own webhook, imitated in this process, for the duration of `body`, which gets
    /// the receiver and its URL.
    ///
    /// ```swift
    /// try await AppWebhookReceiver.withRunning(.init(secret: secret)) { receiver, url in
    ///     let forward = try await runProcess(
    ///         "reconciler", ["forward", "--forward-to", url], environment: ["RECONCILER_FORWARD_SECRET": secret])
    /// }
    /// ```
    package static func withRunning(_ configuration: Configuration, _ body: (AppWebhookReceiver, String) async throws -> Void) async throws {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let receiver = AppWebhookReceiver(configuration: configuration)
        let serving = Task { try await receiver.run(onBound: { continuation.yield($0) }) }
        defer { serving.cancel() }
        var bound = ports.makeAsyncIterator()
        guard let port = await bound.next() else { throw ProcessFailure(description: "the receiver did not start") }
        try await body(receiver, "http://127.0.0.1:\(port)/notifications")
    }
}
