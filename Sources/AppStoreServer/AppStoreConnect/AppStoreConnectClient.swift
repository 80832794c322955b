public import AsyncHTTPClient
public import Crypto
public import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// A client of the App Store Connect API, for what the reconciler needs of it: an app's
/// notification settings (`GET /v1/apps/{id}`, `GET /v1/apps?filter[bundleId]=`) and changing them
/// (Modify an App, `PATCH /v1/apps/{id}`). Its key is an App Store Connect API key of its own (not
/// the In-App Purchase key); its tokens live at most 20 minutes, with `aud: appstoreconnect-v1`
/// and no `bid`.
public struct AppStoreConnectClient: Sendable {
    public static let defaultBaseURL = "https://api.appstoreconnect.apple.com"

    public struct Configuration: Sendable {
        public var baseURL: String
        public var privateKey: P256.Signing.PrivateKey
        public var keyId: String
        public var issuerId: String
        public var requestTimeout: Duration

        public init(
            baseURL: String? = nil, privateKey: P256.Signing.PrivateKey, keyId: String, issuerId: String, requestTimeout: Duration = .seconds(30)
        ) {
            self.baseURL = baseURL ?? AppStoreConnectClient.defaultBaseURL
            self.privateKey = privateKey
            self.keyId = keyId
            self.issuerId = issuerId
            self.requestTimeout = requestTimeout
        }
    }

    /// A request App Store Connect refused or could not answer.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        /// `nil`: no answer (a connection failure, a timeout).
        public var httpStatusCode: Int?
        public var errors: [AppStoreConnectErrors.Item]
        /// What went wrong without an answer.
        public var transport: String?

        public var description: String {
            if let transport { return "App Store Connect did not answer: \(transport)" }
            let items = errors.map { item in [item.code, item.title, item.detail].compactMap { $0 }.joined(separator: ": ") }
            return "App Store Connect answered HTTP \(httpStatusCode ?? 0)" + (items.isEmpty ? "" : ": " + items.joined(separator: "; "))
        }

        /// A 5xx, a 429 or no answer: worth asking again later.
        public var isTransient: Bool { httpStatusCode.map { $0 == 429 || $0 >= 500 } ?? true }
    }

    public let configuration: Configuration
    private let httpClient: HTTPClient
    private let baseURL: String

    public init(configuration: Configuration, httpClient: HTTPClient = .shared) {
        self.configuration = configuration
        self.httpClient = httpClient
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
    }

    /// Get App Information: the app whose Apple ID is `id`.
    public func app(id: String) async throws -> AppStoreConnectApp {
        let document: AppStoreConnectApp.Document = try await send(.GET, path: "/v1/apps/\(id)\(Self.fields)", body: nil)
        return document.data
    }

    /// The app with `bundleId`, found by List Apps with `filter[bundleId]`; `nil` when the team has none.
    public func app(bundleId: String) async throws -> AppStoreConnectApp? {
        let query = "?filter%5BbundleId%5D=\(AppStoreServerAPIClient.percentEncoded(bundleId))"
        let list: AppStoreConnectApp.ListDocument = try await send(.GET, path: "/v1/apps\(query)", body: nil)
        return list.data.first { $0.attributes.bundleId == bundleId }
    }

    /// Modify an App: sets the notification settings `attributes` names (the others stay).
    public func modifyApp(id: String, _ attributes: AppStoreConnectApp.Attributes) async throws -> AppStoreConnectApp {
        let body = try JSONEncoder().encode(AppStoreConnectApp.Document(data: AppStoreConnectApp(id: id, attributes: attributes)))
        let document: AppStoreConnectApp.Document = try await send(.PATCH, path: "/v1/apps/\(id)", body: body)
        return document.data
    }

    private static let fields =
        "?fields%5Bapps%5D=bundleId,subscriptionStatusUrl,subscriptionStatusUrlVersion,subscriptionStatusUrlForSandbox,subscriptionStatusUrlVersionForSandbox"

    private func send<Response: Decodable>(_ method: HTTPMethod, path: String, body: Data?) async throws -> Response {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(try token())")
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: body))
        }
        let response: HTTPClientResponse
        let bytes: ByteBuffer
        do {
            response = try await httpClient.execute(request, timeout: .seconds(configuration.requestTimeout.components.seconds))
            bytes = try await response.body.collect(upTo: 4 * 1024 * 1024)
        } catch {
            throw Failure(httpStatusCode: nil, errors: [], transport: "\(error)")
        }
        let status = Int(response.status.code)
        guard (200..<300).contains(status) else {
            let errors = (try? JSONDecoder().decode(AppStoreConnectErrors.self, from: Data(buffer: bytes)))?.errors ?? []
            throw Failure(httpStatusCode: status, errors: errors, transport: nil)
        }
        guard let decoded = try? JSONDecoder().decode(Response.self, from: Data(buffer: bytes)) else {
            throw Failure(
                httpStatusCode: status,
                errors: [.init(status: "\(status)", code: nil, title: "not the document App Store Connect documents", detail: nil)], transport: nil)
        }
        return decoded
    }

    /// A token for one call: 20 minutes at most (App Store Connect refuses longer ones), no `bid`.
    func token(now: Date = Date()) throws -> String {
        struct Header: Encodable {
            let alg = "ES256"
            var kid: String
            let typ = "JWT"
        }
        struct Claims: Encodable {
            var iss: String
            var iat: Int64
            var exp: Int64
            let aud = "appstoreconnect-v1"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let issuedAt = Int64(now.timeIntervalSince1970)
        let header = Base64URL.encode(try encoder.encode(Header(kid: configuration.keyId)))
        let claims = Base64URL.encode(try encoder.encode(Claims(iss: configuration.issuerId, iat: issuedAt, exp: issuedAt + 15 * 60)))
        let signature = try configuration.privateKey.signature(for: Data("\(header).\(claims)".utf8))
        return "\(header).\(claims).\(Base64URL.encode(signature.rawRepresentation))"
    }
}
