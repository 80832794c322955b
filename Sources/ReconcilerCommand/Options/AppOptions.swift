import AppStoreServer
import ArgumentParser
import Foundation
import X509

/// Which app and environment signed data must belong to, and which roots it must chain to.
struct AppOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The app's bundle id (env APP_STORE_BUNDLE_ID).", valueName: "id"))
    var bundleId: String?

    @Option(name: .long, help: ArgumentHelp("The app's Apple ID, required in production (env APP_STORE_APP_APPLE_ID).", valueName: "id"))
    var appAppleId: Int64?

    @Option(name: .long, help: ArgumentHelp("production or sandbox (env APP_STORE_ENVIRONMENT, default production).", valueName: "env"))
    var environment: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Trusted root certificates, PEM or DER files or directories, comma-separated (env APP_STORE_ROOT_CERTIFICATES; default: the bundled Apple Root CA - G3).",
            valueName: "paths"))
    var rootCertificates: String?

    var resolvedEnvironment: AppStoreEnvironment {
        get throws {
            let value = environment ?? Env.value("APP_STORE_ENVIRONMENT") ?? "production"
            switch value.lowercased() {
            case "production": return .production
            case "sandbox": return .sandbox
            default: throw CommandError.configuration("unknown environment \(value): use production or sandbox")
            }
        }
    }

    var resolvedBundleId: String? { bundleId ?? Env.value("APP_STORE_BUNDLE_ID") }

    func resolvedAppAppleId() throws -> Int64? {
        if let appAppleId { return appAppleId }
        guard let value = Env.value("APP_STORE_APP_APPLE_ID") else { return nil }
        guard let id = Int64(value) else { throw CommandError.configuration("APP_STORE_APP_APPLE_ID must be a number, got \(value)") }
        return id
    }

    func roots() throws -> [Certificate] {
        guard let list = rootCertificates ?? Env.value("APP_STORE_ROOT_CERTIFICATES") else { return [TrustedRoots.appleRootCAG3] }
        let paths = list.split(whereSeparator: { $0 == "," || $0 == ":" }).map { $0.trimmingCharacters(in: .whitespaces) }
        do {
            return try TrustedRoots.load(paths: paths)
        } catch {
            throw CommandError.configuration("APP_STORE_ROOT_CERTIFICATES: \(error)")
        }
    }

    /// The verifier for this app; the bundle id (and, in production, the app's Apple ID) must be set.
    func verifier() throws -> SignedDataVerifier {
        guard let bundleId = resolvedBundleId else {
            throw CommandError.configuration("no bundle id: set APP_STORE_BUNDLE_ID or --bundle-id")
        }
        let environment = try resolvedEnvironment
        let appAppleId = try resolvedAppAppleId()
        if environment == .production, appAppleId == nil {
            throw CommandError.configuration(
                "production needs the app's Apple ID: set APP_STORE_APP_APPLE_ID or --app-apple-id (or use --environment sandbox)")
        }
        do {
            return try SignedDataVerifier(
                configuration: .init(
                    rootCertificates: try roots(), bundleId: bundleId, appAppleId: appAppleId, environment: environment))
        } catch let error as SignedDataVerifier.ConfigurationError {
            throw CommandError.configuration(error.description)
        }
    }
}
