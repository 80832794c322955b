import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// Why a delivery got no answer from the app's webhook, in plain words that name the webhook by
/// its redacted form: "connection refused by https://app.internal/apple", never a client library's
/// type ("NIOCore.IOError error 1"). What the forwarder logs and the queue keeps as `last_error`.
///
/// ```swift
/// DeliveryFailure.describe(error, target: delivery.target, timeout: .seconds(10))
/// // "connection refused by http://127.0.0.1:8080/apple/notifications"
/// ```
enum DeliveryFailure {
    static func describe(_ error: any Error, target: ForwardingTarget, timeout: Duration) -> String {
        let url = target.redacted
        switch error {
        case let error as NIOConnectionError:
            // Every address the name gave was tried: the first one's failure says it (they are alike);
            // with none, the name gave no address.
            if let first = error.connectionErrors.first { return describe(first.error, target: target, timeout: timeout) }
            return "host name not found: \(error.host), of \(url)"
        case let error as SocketAddressError.UnknownHost:
            return "host name not found: \(error.host), of \(url)"
        case let error as IOError:
            return describe(errno: error.errnoCode, url: url)
        case ChannelError.connectTimeout:
            return "no connection to \(url) within \(timeout.operatorText) (timed out)"
        case let error as HTTPClientError:
            return describe(error, url: url, timeout: timeout)
        case _ where isTLSError(error):
            let detail = String(describing: error)
            if detail.contains("failedToValidateHostname") { return "TLS handshake with \(url) failed: its certificate does not name the host" }
            if detail.contains("CERTIFICATE_VERIFY_FAILED") {
                return "TLS handshake with \(url) failed: its certificate is not signed by a trusted CA"
            }
            return "TLS handshake with \(url) failed: \(detail)"
        case is CancellationError:
            return "the request to \(url) was stopped before an answer"
        default:
            return "no answer from \(url): \(String(describing: error))"
        }
    }

    /// NIOSSL's errors (NIOSSLError, NIOSSLExtraError, BoringSSLError), known by their module: the
    /// HTTP client brings NIOSSL, but this package does not name swift-nio-ssl to import it.
    private static func isTLSError(_ error: any Error) -> Bool {
        let type = String(reflecting: Swift.type(of: error))
        return type.hasPrefix("NIOSSL.") || type.contains("BoringSSL")
    }

    private static func describe(errno code: CInt, url: String) -> String {
        switch code {
        case ECONNREFUSED: "connection refused by \(url)"
        case ETIMEDOUT: "no connection to \(url) (timed out)"
        case ECONNRESET, EPIPE: "\(url) closed the connection before answering (reset)"
        case EHOSTUNREACH, ENETUNREACH: "\(url) is unreachable (no route to its host)"
        default: "no connection to \(url): \(String(cString: strerror(code)))"
        }
    }

    private static func describe(_ error: HTTPClientError, url: String, timeout: Duration) -> String {
        switch error {
        case .connectTimeout, .getConnectionFromPoolTimeout:
            "no connection to \(url) within \(timeout.operatorText) (timed out)"
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            "no answer from \(url) within \(timeout.operatorText) (timed out)"
        case .tlsHandshakeTimeout:
            "TLS handshake with \(url) failed: timed out"
        case .remoteConnectionClosed:
            "\(url) closed the connection before answering"
        case .cancelled:
            "the request to \(url) was stopped before an answer"
        default:
            // "HTTPClientError.invalidURL": the case's name is the plain part.
            "no answer from \(url): \(String(describing: error).replacingOccurrences(of: "HTTPClientError.", with: ""))"
        }
    }
}
