package import AppStoreServer
import Foundation

/// One check of `reconciler doctor`, by the name the documented list gives it (docs/reference.md):
/// scripts match these names, so a name never changes once published.
package enum DoctorCheck: String, Sendable, Codable, CaseIterable {
    case config
    case keyFile = "key-file"
    case rootCertificates = "root-certificates"
    case database
    case migrations
    case idleTransactions = "idle-transactions"
    case feed
    case forwardQueue = "forward-queue"
    case appleAuth = "apple-auth"
    case clock
    case notificationURLs = "notification-urls"
    case serveHealth = "serve-health"
    case testNotification = "test-notification"
    case appApiTokenFile = "app-api-token-file"
}

/// How one check came out.
package enum DoctorStatus: String, Sendable, Codable {
    case ok, warn, fail

    /// As the text lines show it: a failure stands out.
    package var label: String {
        switch self {
        case .ok: "ok"
        case .warn: "warn"
        case .fail: "FAIL"
        }
    }
}

/// What one check found for one app and environment, or for the whole deployment (`app` and
/// `environment` `nil`): what it saw (`detail`) and, unless all is well, what to do (`fix`, one
/// sentence). Neither ever holds a secret: checks name files, keys and hosts, never their contents.
package struct DoctorResult: Sendable, Hashable, Encodable {
    package var check: DoctorCheck
    package var app: String?
    package var environment: AppStoreEnvironment?
    package var status: DoctorStatus
    package var detail: String
    package var fix: String?
    /// A failure a rerun may not see (an Apple 5xx, a timeout, a database failover): alone, such
    /// failures make the exit 2, not 1. Not part of the JSON.
    package var transient: Bool

    package init(
        _ check: DoctorCheck, app: String? = nil, environment: AppStoreEnvironment? = nil, status: DoctorStatus, detail: String, fix: String? = nil,
        transient: Bool = false
    ) {
        self.check = check
        self.app = app
        self.environment = environment
        self.status = status
        self.detail = detail
        self.fix = fix
        self.transient = transient
    }

    static func ok(_ check: DoctorCheck, app: String? = nil, environment: AppStoreEnvironment? = nil, _ detail: String) -> Self {
        Self(check, app: app, environment: environment, status: .ok, detail: detail)
    }

    private enum CodingKeys: String, CodingKey { case check, app, environment, status, detail, fix }

    /// Every key, `null` included: a reader finds the same six keys on every item.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(check, forKey: .check)
        try container.encode(app, forKey: .app)
        try container.encode(environment, forKey: .environment)
        try container.encode(status, forKey: .status)
        try container.encode(detail, forKey: .detail)
        try container.encode(fix, forKey: .fix)
    }

    /// The check's one line: `FAIL migrations: ... Fix: ...`, with its app and environment when it has them.
    package var line: String {
        let scope = app.map { " \($0)" + (environment.map { " (\($0))" } ?? "") } ?? ""
        let padded = status.label.padding(toLength: 4, withPad: " ", startingAt: 0)
        return "\(padded) \(check.rawValue)\(scope): \(detail)" + (fix.map { " Fix: \($0)" } ?? "")
    }
}
