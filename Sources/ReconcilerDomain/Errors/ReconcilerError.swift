/// Every failure the reconciler reports of its own: a configuration it cannot use, a database that
/// is away or behind, a run that cannot start or go on, a value it cannot have stored. Match
/// ``code``, never the text. ``description`` is what an operator reads (it names keys, files,
/// runs and the reconciler's own states, never stored data, a secret or a URL's credentials);
/// ``debugDescription`` adds the details for logs. Each code carries how a command that ends with
/// it exits, how the webhook answers a notification it stopped (its HTTP status and the `error` of
/// the body, as Hummingbird's `HTTPResponseError` says its own status) and, where one helps, what to
/// do about it: the command line maps errors to exit codes in one place
/// (`ReconcilerError(endingCommandWith:)`), the webhook maps them to HTTP answers in one place
/// (`WebhookAnswer(failure:)`). Nothing between re-classifies an error: it keeps its code.
///
/// ```swift
/// do { try await migrator.requireCurrent(database) } catch let error as ReconcilerError where error.code == .schemaBehind {
///     print(error, error.remedy ?? "")
/// }
/// ```
package struct ReconcilerError: Error, CustomStringConvertible, CustomDebugStringConvertible, Sendable {
    /// What kind of failure. Extensible: a new code is a new static constant, never a new type.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        /// Every code there is: a new one is a new case here, a new constant below, and a line in
        /// each switch (the compiler asks for it), so no code goes without its exit class.
        fileprivate enum Base: String, CaseIterable, Sendable {
            case invalidInput, unreadable, invalidYAML, unknownKey, missingKey, invalidValue, duplicateApp, noSuchApp, appMismatch, untrustedChains,
                textfile, invalidDatabaseURL, databaseRefused, databaseUnavailable, schemaNotCurrent, unknownStoredValue, missingApp, lockOrder,
                missingRow, payloadUnavailable, leaseHeld, leaseLost, checkpointConflict, checkpointAlreadyCommitted, invalidWindow, cannotJoin,
                feedPositionPruned, appNotConfigured, routingUnavailable, stopping, overloaded, selector, malformedSelector, unknownOrderId,
                unknownTransactionId, unknownAppAccountToken, appleRefused, window, notGenuine, invalidAnswer, unknownConsumptionRequest,
                notRecovered, interrupted, needsAttention, rejected, storedPayloadNotGenuine, consumptionRequestSettled, answerNotRecorded,
                credentialsRefused, bodyTooLarge, malformedBody, notificationTooOld, unauthorized, invalidQuery, unknownAppUserId
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// Every code, for the table that maps each to how a command exits.
        package static var allCases: [Code] { Base.allCases.map(Code.init) }

        package var description: String { base.rawValue }

        /// How a command that ends with this error exits.
        package var exitClass: ExitClass {
            switch base {
            case .invalidInput, .unreadable, .invalidYAML, .unknownKey, .missingKey, .invalidValue, .duplicateApp, .noSuchApp, .appMismatch,
                .untrustedChains, .textfile, .invalidDatabaseURL, .databaseRefused, .schemaNotCurrent, .unknownStoredValue, .missingApp,
                .payloadUnavailable, .leaseHeld, .invalidWindow, .cannotJoin, .feedPositionPruned, .appNotConfigured, .selector, .malformedSelector,
                .unknownOrderId, .unknownTransactionId, .unknownAppAccountToken, .appleRefused, .window, .invalidAnswer, .unknownConsumptionRequest,
                .consumptionRequestSettled, .credentialsRefused, .bodyTooLarge, .malformedBody, .notificationTooOld, .unauthorized,
                .invalidQuery, .unknownAppUserId:
                .configuration
            case .databaseUnavailable, .lockOrder, .missingRow, .leaseLost, .checkpointConflict, .checkpointAlreadyCommitted, .routingUnavailable,
                .stopping, .overloaded, .notRecovered, .interrupted:
                .retryable
            case .notGenuine, .needsAttention, .answerNotRecorded: .attention
            case .rejected, .storedPayloadNotGenuine: .rejected
            }
        }

        /// The HTTP status the webhook answers a notification it did not store for this reason: a
        /// 4xx where Apple's retry would fail alike (or the body is not Apple's delivery), 503 where
        /// Apple should deliver it again (the store away or behind, a shutdown, an app not yet configured).
        package var httpStatus: Int {
            switch base {
            case .bodyTooLarge: 413
            case .malformedBody, .notificationTooOld, .invalidQuery: 400
            case .unauthorized: 401
            default: 503
            }
        }

        /// The `error` of the webhook's answer body: what its sender (Apple, or whoever posts) reads.
        /// Every failure that is no verdict on the notification is `STORE_UNAVAILABLE`.
        package var webhookCode: String {
            switch base {
            case .bodyTooLarge: "BODY_TOO_LARGE"
            case .malformedBody: "MALFORMED_BODY"
            case .notificationTooOld: "NOTIFICATION_TOO_OLD"
            case .unauthorized: "UNAUTHORIZED"
            case .invalidQuery: "INVALID_QUERY"
            case .appNotConfigured: "APP_NOT_CONFIGURED"
            case .stopping: "STOPPING"
            case .overloaded: "OVERLOADED"
            default: "STORE_UNAVAILABLE"
            }
        }

        /// What an operator does about it, when the description does not already say.
        package var remedy: String? {
            switch base {
            case .appMismatch: "check the bundle id, the app's Apple ID and the environment"
            case .untrustedChains: "check the configured root certificates"
            case .databaseUnavailable: "rerun once the database is back; the work resumes where it stopped"
            case .unknownStoredValue: "run the version of the reconciler that wrote it"
            case .payloadUnavailable: "run `reconciler verify-stored` to list what cannot be rebuilt"
            case .leaseHeld: "try again later or pass --wait"
            case .leaseLost: "rerun to resume"
            case .notGenuine: "see `reconciler rejections`"
            case .unknownConsumptionRequest: "`reconciler consumption list` shows the stored requests and their transactions"
            case .storedPayloadNotGenuine: "the database was changed; restore the listed rows from a backup"
            case .consumptionRequestSettled: "`reconciler consumption send --again` sends an answer anyway"
            default: nil
            }
        }

        // MARK: The command line, the environment and the configuration file (exit 1)

        /// A flag, an argument or an environment variable the command cannot use.
        package static let invalidInput = Code(.invalidInput)
        /// The configuration file cannot be read.
        package static let unreadable = Code(.unreadable)
        /// The configuration file is not YAML.
        package static let invalidYAML = Code(.invalidYAML)
        /// The configuration names a key this version does not know (a typo is not ignored).
        package static let unknownKey = Code(.unknownKey)
        /// A key the configuration needs is missing.
        package static let missingKey = Code(.missingKey)
        /// A key holds a value of the wrong form.
        package static let invalidValue = Code(.invalidValue)
        /// Two apps of the configuration are the same app and environment.
        package static let duplicateApp = Code(.duplicateApp)
        /// `--app` names no app of the configuration.
        package static let noSuchApp = Code(.noSuchApp)
        /// Signed data names another bundle id, app Apple ID or environment than the configured one.
        package static let appMismatch = Code(.appMismatch)
        /// Most signed values fail their certificate chain: the trusted roots are wrong, not the payloads.
        package static let untrustedChains = Code(.untrustedChains)
        /// The metrics textfile cannot be written.
        package static let textfile = Code(.textfile)

        // MARK: The database

        /// `DATABASE_URL` (or a TLS setting) cannot be used as given.
        package static let invalidDatabaseURL = Code(.invalidDatabaseURL)
        /// The server refused the connection, or a statement, for a reason a retry does not fix
        /// (password, TLS, no such database; a permission, a constraint, a schema changed by hand).
        package static let databaseRefused = Code(.databaseRefused)
        /// The database stayed unreachable for longer than the command waits.
        package static let databaseUnavailable = Code(.databaseUnavailable)
        /// The schema is behind this version, or ahead of it, or the migrations do not add up.
        package static let schemaNotCurrent = Code(.schemaNotCurrent)
        /// A column the reconciler itself writes (a run's status or phase, a shard's or a queue row's
        /// status, a failure kind, a rejection's source) holds a value this version does not know:
        /// written by a newer version or by hand. It is not guessed.
        package static let unknownStoredValue = Code(.unknownStoredValue)
        /// A purchase read or written without naming its app and environment.
        package static let missingApp = Code(.missingApp)
        /// Purchases were locked in an order that would misorder the change feed.
        package static let lockOrder = Code(.lockOrder)
        /// A row the store had just written was not there.
        package static let missingRow = Code(.missingRow)
        /// A stored signed value cannot be rebuilt: it was pruned, or its parts name a header that is
        /// not stored (changed by hand).
        package static let payloadUnavailable = Code(.payloadUnavailable)

        // MARK: Runs, workers and the feed

        /// Another process holds the run lease of this app and environment.
        package static let leaseHeld = Code(.leaseHeld)
        /// This process could not renew its lease in time: another run may have taken over.
        package static let leaseLost = Code(.leaseLost)
        /// A shard's checkpoint moved under this worker (another one paged it).
        package static let checkpointConflict = Code(.checkpointConflict)
        /// A shard's checkpoint is already where this page would have put it: the page committed
        /// before (its commit's answer was lost), so this attempt changes nothing.
        package static let checkpointAlreadyCommitted = Code(.checkpointAlreadyCommitted)
        /// The window a run was given cannot be reconciled (empty, in the future, garbage).
        package static let invalidWindow = Code(.invalidWindow)
        /// `reconciler work` found no run it can join.
        package static let cannotJoin = Code(.cannotJoin)
        /// The change feed no longer holds the position a follower asked for.
        package static let feedPositionPruned = Code(.feedPositionPruned)
        /// A routed notification names no configured app (the webhook answers 4xx: it is not ours).
        package static let appNotConfigured = Code(.appNotConfigured)
        /// A notification could not be routed for a reason that is no verdict on it (the webhook answers 503).
        package static let routingUnavailable = Code(.routingUnavailable)
        /// The process is stopping: a live notification was not stored (the webhook answers 503 `STOPPING`; Apple delivers it again).
        package static let stopping = Code(.stopping)
        /// Too many live notifications wait for the database: one more was not stored (the webhook
        /// answers 503 `OVERLOADED`; Apple delivers it again).
        package static let overloaded = Code(.overloaded)

        // MARK: The webhook's request (never a command's end)

        /// The body is larger than `serve --max-body-bytes` (413, not read).
        package static let bodyTooLarge = Code(.bodyTooLarge)
        /// The body is not Apple's `{"signedPayload": "<JWS>"}` (400).
        package static let malformedBody = Code(.malformedBody)
        /// An authentic notification of an app or environment not served, signed too long ago to be
        /// Apple's delivery: a copy posted again (400, not stored).
        package static let notificationTooOld = Code(.notificationTooOld)

        // MARK: The app API's request (never a command's end)

        /// No `Authorization: Bearer` with a token of `appApi.tokenFile` (401).
        package static let unauthorized = Code(.unauthorized)
        /// A query or body the app API does not take: a parameter missing, unknown, repeated or of
        /// the wrong form (400).
        package static let invalidQuery = Code(.invalidQuery)

        // MARK: Repair

        /// None, or more than one, of `--order-id`, `--transaction-id`, `--app-account-token`.
        package static let selector = Code(.selector)
        /// An order ID, transaction ID or UUID of the wrong form (or one Apple calls invalid).
        package static let malformedSelector = Code(.malformedSelector)
        /// Look Up Order ID answered status 1: no purchase of this app in that order.
        package static let unknownOrderId = Code(.unknownOrderId)
        /// Apple knows no such transaction (4040010).
        package static let unknownTransactionId = Code(.unknownTransactionId)
        /// No stored purchase carries the app account token.
        package static let unknownAppAccountToken = Code(.unknownAppAccountToken)
        /// `repair --app-user-id` names a user no stored purchase carries (no import named them).
        package static let unknownAppUserId = Code(.unknownAppUserId)
        /// Apple refused the request that names the customer (another 4xx).
        package static let appleRefused = Code(.appleRefused)
        /// Apple answered 401: the key, key ID, issuer ID or bundle ID is wrong. Every request of
        /// the app fails alike, so the work stops rather than fail one shard or customer after another.
        package static let credentialsRefused = Code(.credentialsRefused)
        /// `--since` is outside Apple's notification history.
        package static let window = Code(.window)
        /// Every signed transaction of the order failed verification: quarantined, nothing applied.
        package static let notGenuine = Code(.notGenuine)

        // MARK: Consumption requests

        /// An answer to a consumption request that Apple's rules refuse (checked before any request).
        package static let invalidAnswer = Code(.invalidAnswer)
        /// No consumption request is stored for the transaction (in the apps and environments given).
        package static let unknownConsumptionRequest = Code(.unknownConsumptionRequest)
        /// The request was answered (Apple accepted an answer), acked, or an answer to it is being sent
        /// (or was, and what Apple said was never recorded): no answer is sent unless on purpose.
        package static let consumptionRequestSettled = Code(.consumptionRequestSettled)
        /// Apple accepted an answer, and the database could not record it: do not send it again.
        package static let answerNotRecorded = Code(.answerNotRecorded)

        // MARK: How a command ended

        /// The work ran but something retryable was not recovered.
        package static let notRecovered = Code(.notRecovered)
        /// SIGINT or SIGTERM stopped the work (at a checkpoint): rerunning the command resumes it.
        package static let interrupted = Code(.interrupted)
        /// Done, but something needs a person (first quarantines, requests Apple refused, a window lost to retention).
        package static let needsAttention = Code(.needsAttention)
        /// A signed value is not genuine.
        package static let rejected = Code(.rejected)
        /// `verify-stored`: a stored signed value, rebuilt, does not verify (or no longer matches its row).
        package static let storedPayloadNotGenuine = Code(.storedPayloadNotGenuine)
    }

    package var code: Code
    /// For an operator: what happened, naming keys, files and runs, never stored data or secrets.
    package var description: String
    /// ``description`` with the details (Apple's answer, the server's message), for logs.
    package var debugDescription: String
    /// The run or repair the failure belongs to, when one was recorded.
    package var runId: Int64?
    /// The configuration key at fault, as a path (`apps[1].appAppleId`), when one is.
    package var key: String?

    package init(_ code: Code, _ description: String, details: String? = nil, runId: Int64? = nil) {
        self.code = code
        self.description = description
        self.debugDescription = details.map { "\(description) (\($0))" } ?? description
        self.runId = runId
    }

    /// What to do about it, when the description does not say.
    package var remedy: String? { code.remedy }
    /// How a command that ends with it exits.
    package var exitClass: ExitClass { code.exitClass }
    /// The exit code of ``exitClass``.
    package var exitCode: Int32 { code.exitClass.rawValue }
    /// The HTTP status the webhook answers with it.
    package var httpStatus: Int { code.httpStatus }

    /// Exit 1: the command line or configuration must change.
    package static func configuration(_ message: String) -> ReconcilerError { ReconcilerError(.invalidInput, message) }
    /// Exit 2: the work ran but something was not recovered.
    package static func partial(_ message: String) -> ReconcilerError { ReconcilerError(.notRecovered, message) }
    /// Exit 4: done, but something needs a person; not a retry.
    package static func attention(_ message: String) -> ReconcilerError { ReconcilerError(.needsAttention, message) }
    /// Exit 3: a signed value is not genuine.
    package static func rejected(_ message: String) -> ReconcilerError { ReconcilerError(.rejected, message) }
}
