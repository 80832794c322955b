package import AppStoreServer
package import ReconcilerDomain

/// One `forwardTo` of the configuration file: where an app's notifications are forwarded (its own
/// webhook's URL) and how each delivery is signed. The file says where the URL and the HMAC secret
/// are read (a file, an environment variable), so it holds no secret itself; a URL without
/// credentials may be written in it. The forwarding commands (`serve`, `run`, `repair`, `forward`)
/// read both at start.
///
/// ```yaml
/// forwardTo: https://app.internal/apple/notifications        # signed with the process's secret
/// forwardTo: {urlEnv: ONE_HOOK_URL, secretFile: /run/secrets/one-hook-secret}
/// forwardTo: {url: https://app.internal/apple/notifications, unsigned: true}
/// forwardTo:                                                  # several, each for some environments
///   - {name: app, urlEnv: APP_HOOK_URL, secretEnv: APP_HOOK_SECRET, environments: [production]}
///   - {name: staging, url: https://staging.internal/apple, unsigned: true, environments: [sandbox]}
///   - {name: refunds, urlEnv: REFUNDS_URL, secretEnv: REFUNDS_SECRET, types: [REFUND, CONSUMPTION_REQUEST]}
/// ```
package struct ForwardingDestination: Sendable, Hashable, CustomStringConvertible {
    /// Where a value is read.
    package enum Source: Sendable, Hashable, CustomStringConvertible {
        /// Written in the file (the `url` key; never a secret).
        case inline(String)
        /// The contents of this file, without the whitespace around them (`urlFile`, `secretFile`).
        case file(String)
        /// This environment variable (`urlEnv`, `secretEnv`).
        case environment(String)

        /// Where the value is read, never the value: `the file /run/secrets/hook`, `$HOOK_URL`.
        package var description: String {
            switch self {
            case .inline: "the configuration file"
            case .file(let path): "the file \(path)"
            case .environment(let name): "$\(name)"
            }
        }
    }

    /// How each delivery is signed (the `Reconciler-Signature` header).
    package enum Signing: Sendable, Hashable {
        /// A plain URL (`forwardTo: URL`) has no secret of its own: the process's
        /// (`--forward-secret-file`, RECONCILER_FORWARD_SECRET), or its `--forward-unsigned`.
        case process
        /// `secretFile` or `secretEnv`.
        case secret(Source)
        /// `unsigned: true`: deliveries carry no signature.
        case unsigned
    }

    /// The webhook's URL.
    package var url: Source
    package var signing: Signing
    /// The key it was written at, for messages: `forwardTo` (every app's) or `apps[1].forwardTo`.
    package var key: String
    /// Its `name` (`forward --redeliver --target`), when it has one; a list's targets each have one.
    package var name: String?
    /// The environments whose notifications it receives (`environments`; `nil`: every one). The
    /// loader resolves it: each app in an environment forwards to the targets that include it.
    package var environments: Set<AppStoreEnvironment>?
    /// The notification types it receives (`types`: `TYPE` or `TYPE/SUBTYPE`; `nil`: every one).
    package var types: NotificationTypeFilter?

    package init(
        url: Source, signing: Signing, key: String, name: String? = nil, environments: Set<AppStoreEnvironment>? = nil,
        types: NotificationTypeFilter? = nil
    ) {
        self.url = url
        self.signing = signing
        self.key = key
        self.name = name
        self.environments = environments
        self.types = types
    }

    /// Whether an app in `environment` forwards to it.
    package func receives(_ environment: AppStoreEnvironment) -> Bool { environments?.contains(environment) ?? true }

    /// The key, never the URL (which may carry credentials).
    package var description: String { key }
}
