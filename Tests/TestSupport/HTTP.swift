import AsyncHTTPClient
package import Foundation
import NIOCore
import NIOFoundationCompat
package import NIOHTTP1

/// Small HTTP helpers over the shared AsyncHTTPClient.
package enum HTTP {
    package struct Reply {
        package var status: Int
        package var body: Data
        package var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }

        package init(status: Int, body: Data) {
            self.status = status
            self.body = body
        }
    }

    package static func request(_ method: HTTPMethod, _ url: String, body: Data? = nil, headers: [(String, String)] = []) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: body))
        }
        // A server that is up but slow on a loaded machine still answers; one that is down is refused at once.
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(hangGuard.components.seconds))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return Reply(status: Int(response.status.code), body: Data(buffer: bytes))
    }

    package static func postNotification(_ url: String, signedPayload: String) async throws -> Reply {
        try await request(.POST, url, body: try JSONEncoder().encode(["signedPayload": signedPayload]))
    }
}
