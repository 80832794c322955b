import Foundation

/// A TCP port on 127.0.0.1 that takes connections and never answers: the kernel completes each
/// handshake into the listen queue and nothing ever accepts or reads, as a server that hangs
/// (stopped, or behind a firewall that lets the handshake through) looks to a client. Closed on deinit.
///
/// ```swift
/// let silent = try SilentListener()
/// let url = "postgres://postgres@127.0.0.1:\(silent.port)/postgres"
/// ```
package final class SilentListener: Sendable {
    package let port: Int
    private let descriptor: Int32

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && listen(descriptor, 128) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard bound else {
            let problem = String(cString: strerror(errno))
            close(descriptor)
            throw Failure(description: "cannot listen on 127.0.0.1: \(problem)")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
