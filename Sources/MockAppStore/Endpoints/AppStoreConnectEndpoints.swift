import AppStoreServer
import Crypto
import Foundation
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// The App Store Connect API endpoints `reconciler doctor` needs, on every base URL: Get App
/// Information (`GET /v1/apps/{id}`), List Apps by bundle ID (`GET /v1/apps?filter[bundleId]=`)
/// and Modify an App (`PATCH /v1/apps/{id}`), for the four notification settings. Apple's rules:
/// an ES256 token of the App Store Connect key (its own, not the In-App Purchase key) with
/// `aud: appstoreconnect-v1`, no `bid`, living at most 20 minutes; errors as
/// `{"errors": [{status, code, title, detail}]}`.
///
/// Each app starts as the drill needs it: both environments' URLs the mock's webhook (or
/// ``MockAppStore/defaultNotificationURL``), Version 2. `POST /mock/app-store-connect?bundleId=...` with any of the four
/// attributes sets them (a wrong URL, `V1`); `GET /mock/app-store-connect` lists every app's.
extension MockAppStore {
    /// What `reconciler.yaml`'s `notificationURL` and every app's URLs are without `--webhook`.
    static let defaultNotificationURL = "http://127.0.0.1:8080/notifications"

    /// The App Store Connect API key's ID the mock accepts.
    static let appStoreConnectKeyId = "MOCKASC001"

    /// Every served app's notification settings as the mock starts them.
    static func initialConnectApps(_ configuration: Configuration) -> [String: AppStoreConnectApp] {
        let url = configuration.webhookURL ?? defaultNotificationURL
        var apps: [String: AppStoreConnectApp] = [:]
        for app in configuration.servedApps {
            apps[app.bundleId] = AppStoreConnectApp(
                id: String(app.appAppleId),
                attributes: .init(
                    bundleId: app.bundleId, subscriptionStatusUrl: url, subscriptionStatusUrlVersion: "V2", subscriptionStatusUrlForSandbox: url,
                    subscriptionStatusUrlVersionForSandbox: "V2"))
        }
        return apps
    }

    func appStoreConnect(_ request: MockHTTPRequest) -> MockHTTPResponse {
        if let refusal = checkConnectToken(request.headers.first(name: "Authorization")) {
            return Self.connectError(.unauthorized, "NOT_AUTHORIZED", "Authentication credentials are missing or invalid.", refusal)
        }
        let id = request.path.hasPrefix("/v1/apps/") ? String(request.path.dropFirst("/v1/apps/".count)) : nil
        switch (request.method, id) {
        case (.GET, nil):
            guard let bundleId = request.queryValue("filter[bundleId]") else {
                return .json(.ok, AppStoreConnectApp.ListDocument(data: connectApps.withLock { $0.values.sorted { $0.id < $1.id } }))
            }
            let found = connectApps.withLock { $0[bundleId] }
            return .json(.ok, AppStoreConnectApp.ListDocument(data: found.map { [$0] } ?? []))
        case (.GET, let id?):
            guard let app = connectApps.withLock({ $0.values.first { $0.id == id } }) else { return Self.notFound(id) }
            return .json(.ok, AppStoreConnectApp.Document(data: app))
        case (.PATCH, let id?):
            guard let document = try? JSONDecoder().decode(AppStoreConnectApp.Document.self, from: Data(buffer: request.body)) else {
                return Self.connectError(
                    .badRequest, "PARAMETER_ERROR.INVALID", "A parameter has an invalid value", "The request body is not an apps document.")
            }
            guard document.data.id == id, document.data.type == "apps" else {
                return Self.connectError(
                    .conflict, "ENTITY_ERROR.INCLUDED.INVALID_ID", "The provided entity includes an invalid id",
                    "The id in the body is not the path's.")
            }
            let attributes = document.data.attributes
            for version in [attributes.subscriptionStatusUrlVersion, attributes.subscriptionStatusUrlVersionForSandbox].compactMap({ $0 })
            where !["V1", "V2"].contains(version) {
                return Self.connectError(
                    .conflict, "ENTITY_ERROR.ATTRIBUTE.INVALID", "An attribute value is invalid.", "A version must be V1 or V2, not \(version).")
            }
            let updated = connectApps.withLock { apps -> AppStoreConnectApp? in
                guard let bundleId = apps.first(where: { $0.value.id == id })?.key else { return nil }
                if let app = apps[bundleId] { apps[bundleId]?.attributes = app.attributes.applying(attributes) }
                return apps[bundleId]
            }
            guard let updated else { return Self.notFound(id) }
            return .json(.ok, AppStoreConnectApp.Document(data: updated))
        default:
            return Self.connectError(
                .methodNotAllowed, "METHOD_NOT_ALLOWED", "The request method is not valid for the resource path.", "\(request.method) \(request.path)"
            )
        }
    }

    /// `POST /mock/app-store-connect?bundleId=...` (body: attributes) and `GET /mock/app-store-connect`.
    func appStoreConnectControl(_ request: MockHTTPRequest) -> MockHTTPResponse {
        guard request.method == .POST else { return .json(.ok, connectApps.withLock { $0.values.sorted { $0.id < $1.id } }) }
        guard let bundleId = request.queryValue("bundleId"),
            let attributes = try? JSONDecoder().decode(AppStoreConnectApp.Attributes.self, from: Data(buffer: request.body))
        else { return .text(.badRequest, "expected ?bundleId= and a JSON object of notification attributes") }
        let updated = connectApps.withLock { apps -> AppStoreConnectApp? in
            if let app = apps[bundleId] { apps[bundleId]?.attributes = app.attributes.applying(attributes) }
            return apps[bundleId]
        }
        guard let updated else { return .text(.notFound, "no app \(bundleId)") }
        return .json(.ok, updated)
    }

    /// Why a token is refused, `nil` when App Store Connect would take it.
    func checkConnectToken(_ authorization: String?, now: Date = Date()) -> String? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return "no bearer token" }
        let parts = authorization.dropFirst("Bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        struct Header: Decodable { var alg: String?, kid: String? }
        struct Claims: Decodable { var iss: String?, iat: Double?, exp: Double?, aud: String?, bid: String? }
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0].utf8), let claimsData = Base64URL.decode(parts[1].utf8),
            let signatureData = Base64URL.decode(parts[2].utf8), let header = try? JSONDecoder().decode(Header.self, from: Data(headerData)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsData))
        else { return "malformed token" }
        guard header.alg == "ES256", header.kid == Self.appStoreConnectKeyId else { return "unknown key" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            appStoreConnectKey.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return "bad signature" }
        guard claims.iss == configuration.issuerId else { return "wrong issuer" }
        guard claims.aud == "appstoreconnect-v1" else { return "wrong audience" }
        guard claims.bid == nil else { return "an App Store Connect token names no app (bid)" }
        guard let exp = claims.exp, exp > now.timeIntervalSince1970 else { return "expired" }
        guard exp - (claims.iat ?? now.timeIntervalSince1970) <= 20 * 60 else { return "lives longer than 20 minutes" }
        return nil
    }

    static func notFound(_ id: String) -> MockHTTPResponse {
        connectError(.notFound, "NOT_FOUND", "The specified resource does not exist", "There is no resource of type 'apps' with id '\(id)'")
    }

    static func connectError(_ status: HTTPResponseStatus, _ code: String, _ title: String, _ detail: String) -> MockHTTPResponse {
        .json(status, AppStoreConnectErrors(errors: [.init(status: String(status.code), code: code, title: title, detail: detail)]))
    }
}
