package import AsyncHTTPClient

extension HTTPClient {
    /// The client deliveries go out on: ``HTTPClient/shared``'s settings, except that a connection
    /// the app's endpoint refuses (or a name that does not resolve, a failed TLS handshake) fails
    /// the delivery at once. The queue retries it with its backoff; the shared client would instead
    /// hold every delivery for its whole timeout, waiting for the endpoint to come back, so a pass
    /// of `forward --once` over an endpoint that is down took the timeout per delivery.
    /// Never shut down, like the shared one: it lives as long as the process.
    package static let forwarding: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
}
