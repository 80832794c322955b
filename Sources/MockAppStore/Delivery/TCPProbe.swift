import NIOCore
import NIOPosix

/// Whether something accepts TCP connections at an address.
enum TCPProbe {
    static func canConnect(host: String, port: Int) async -> Bool {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(1))
                .connect(host: host, port: port).get()
            try? await channel.close()
            return true
        } catch {
            return false
        }
    }
}
