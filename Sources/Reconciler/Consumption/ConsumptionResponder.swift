package import AppStoreServer
import Foundation
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// Answers to consumption requests by the configuration's policy (`consumption:`): what
/// `reconciler consumption respond` sends now, and, with `automatic: true`, what each run (and
/// `serve`'s leader, through ``answerDue(_:clock:database:)``) sends once a request's `answerAfter`
/// passed. Every open request not acked, soonest deadline first, never an expired one; each answer
/// is written `sending` before Apple is called (``ConsumptionAnswers/deliver(_:again:client:origins:database:afterApple:)``),
/// so a rerun, or a second sender, sends nothing twice.
///
/// ```swift
/// let plan = try await ConsumptionResponder.plan(targets, at: .now, database: database)   // what --dry-run prints
/// let outcome = try await ConsumptionResponder.respond(plan, targets: targets, answeredBy: .policy, database: database)
/// if let ending = outcome.ending { throw ending }
/// ```
package enum ConsumptionResponder {
    /// One app and environment with a policy, ready to call Apple.
    package struct Target: Sendable {
        package var app: AppTarget
        package var settings: ConsumptionSettings
        package var policy: ConsumptionPolicy
        package var client: AppStoreServerAPIClient
        package var origins: SettingOrigins
        /// The app's budget this sender joins only while it has answers to send
        /// (``answerDue(_:clock:database:)``); `nil` when the caller shares it already (a command's
        /// whole work) or shares none.
        package var budget: SharedBudget.Configuration?
        /// The process's lease on the app's budget, shared with its other callers of the app (serve:
        /// the app API's, on the same client), taken instead of ``budget`` while answers are sent.
        package var lease: BudgetLease?

        /// `nil` when `settings` has no policy.
        package init?(
            app: AppTarget, settings: ConsumptionSettings, client: AppStoreServerAPIClient, origins: SettingOrigins,
            budget: SharedBudget.Configuration? = nil, lease: BudgetLease? = nil
        ) {
            guard let policy = settings.policy else { return nil }
            self.app = app
            self.settings = settings
            self.policy = policy
            self.client = client
            self.origins = origins
            self.budget = budget
            self.lease = lease
        }
    }

    /// An answer the policy gives a request.
    package struct Planned: Sendable, Hashable {
        package var request: ConsumptionRequests.Request
        package var target: AppTarget
        package var transactionId: String
        package var productId: String?
        package var body: ConsumptionRequest
    }

    /// A request the policy cannot answer by Apple's rules for its purchase.
    package struct Unanswerable: Sendable, Hashable {
        package var request: ConsumptionRequests.Request
        package var why: String
    }

    /// What the policy would send now.
    package struct Plan: Sendable {
        /// Soonest deadline first.
        package var planned: [Planned] = []
        /// Requests whose answer by the policy breaks Apple's rules (a percentage for a
        /// subscription, `GRANT_PRORATED` without one, Family Sharing): not sent.
        package var unanswerable: [Unanswerable] = []
        /// Apps whose policy does not say `customerConsented: true`: nothing of theirs is sent.
        package var notConsented: [AppTarget] = []
        /// Requests whose newest answer was written `sending` and never completed: Apple may have
        /// it; not sent again (`consumption send --again`, or `ack`).
        package var outcomeUnknown: [ConsumptionRequests.Request] = []
        /// Open requests whose `answerAfter` has not passed (automatic answers only).
        package var waiting = 0
    }

    /// What the policy would send at `now` for the open requests of `targets`: each open request
    /// (neither answered nor acked nor past its deadline; live ones only where `liveRequests` is
    /// `watch`), and with `waitForAnswerAfter`, only those whose first send attempt (else
    /// `signedDate`) is `answerAfter` old. Writes nothing.
    package static func plan(_ targets: [Target], at now: Timestamp, waitForAnswerAfter: Bool = false, database: Database) async throws -> Plan {
        var plan = Plan()
        for target in targets {
            guard target.policy.customerConsented else {
                plan.notConsented.append(target.app)
                continue
            }
            let app = target.app
            let watching: [AppTarget] = target.settings.liveRequests == .watch ? [app] : []
            let found = try await database.transaction { [logger = database.logger] transaction in
                let store = ConsumptionRequests(logger: logger)
                var found: [(ConsumptionRequests.Request, (productType: ProductType?, ownership: InAppOwnershipType?, productId: String?)?)] = []
                for request in try await store.list(apps: [app], openAt: now, watchingLive: watching, limit: 100_000, on: transaction) {
                    found.append(
                        (request, try await request.transactionId.asyncMap { try await store.transactionFacts($0, of: app, on: transaction) }))
                }
                return found
            }
            for (request, facts) in found {
                if request.sending {
                    plan.outcomeUnknown.append(request)
                    continue
                }
                let asked = request.firstSentAt ?? Timestamp(millisecondsSince1970: request.signedDate)
                if waitForAnswerAfter, asked + target.policy.answerAfter > now {
                    plan.waiting += 1
                    continue
                }
                guard let transactionId = request.transactionId else {
                    plan.unanswerable.append(.init(request: request, why: "the request names no transaction"))
                    continue
                }
                guard let body = target.policy.body(forProduct: facts?.productId) else {
                    plan.unanswerable.append(.init(request: request, why: "the policy gives no deliveryStatus or sampleContentProvided"))
                    continue
                }
                do {
                    try ConsumptionAnswers.check(body, productType: facts?.productType, ownership: facts?.ownership)
                } catch let error as ReconcilerError {
                    let product = facts?.productId.map { " (product \($0); set consumption.products.\($0))" } ?? ""
                    plan.unanswerable.append(.init(request: request, why: error.description + product))
                    continue
                }
                plan.planned.append(Planned(request: request, target: app, transactionId: transactionId, productId: facts?.productId, body: body))
            }
        }
        plan.planned.sort { ($0.request.respondBy, $0.request.notificationUUID) < ($1.request.respondBy, $1.request.notificationUUID) }
        return plan
    }

    /// What became of the answers of a plan.
    package struct Outcome: Sendable {
        package var plan: Plan
        package var accepted: [Planned] = []
        /// Answered, acked or being sent by someone else since the plan was made: not sent.
        package var settled: [Planned] = []
        /// Their deadline passed before their turn: not sent.
        package var expired: [Planned] = []
        /// Apple refused them, or they did not reach Apple (429, 5xx, no answer), with why.
        package var failed: [(planned: Planned, error: ReconcilerError)] = []

        /// Nothing sent yet (what a dry run reports).
        package init(plan: Plan) { self.plan = plan }

        /// What ends the command, the most pressing first (1 > 2 > 4): a policy that breaks
        /// Apple's rules or no consent (1), answers that did not reach Apple (2), answers Apple
        /// refused or whose outcome is unknown (4); `nil` when everything planned was accepted.
        package var ending: ReconcilerError? {
            var errors = failed.map { failure in
                failure.error.code == .appleRefused
                    ? ReconcilerError(
                        .needsAttention, "Apple refused the answer for transaction \(failure.planned.transactionId): \(failure.error.description)")
                    : failure.error
            }
            if !plan.notConsented.isEmpty {
                errors.append(
                    ReconcilerError(
                        .invalidAnswer,
                        "the consumption policy of \(plan.notConsented.map(\.description).joined(separator: ", ")) does not say customerConsented: true: "
                            + "nothing is sent by policy without the customers' consent"))
            }
            if !plan.unanswerable.isEmpty {
                errors.append(
                    ReconcilerError(
                        .invalidAnswer,
                        "the consumption policy breaks Apple's rules for \(Plural.count(plan.unanswerable.count, "request")): nothing was sent for them"
                    ))
            }
            if !plan.outcomeUnknown.isEmpty {
                errors.append(
                    ReconcilerError(
                        .needsAttention,
                        "\(Plural.count(plan.outcomeUnknown.count, "request")) had an answer whose outcome was never recorded: Apple may have it; "
                            + "`consumption send --again` or `consumption ack` settles each"))
            }
            guard let index = ExitClass.mostPressing(errors.map(\.exitCode)) else { return nil }
            return ReconcilerError(errors[index].code, errors.map(\.description).joined(separator: "; "))
        }
    }

    /// Sends the plan's answers, soonest deadline first, each through its app's client (its rate
    /// limiter, the shared budget), as `answeredBy`. A request whose deadline passed by its turn
    /// (`clock`) is not sent. `afterApple` runs once Apple answered one (tests stop the work there).
    /// - Throws: ``ReconcilerError/Code/answerNotRecorded`` when the database could not record an
    ///   answer Apple accepted (nothing more is sent); the database's errors.
    package static func respond(
        _ plan: Plan, targets: [Target], answeredBy: ConsumptionAnsweredBy, database: Database,
        clock: @escaping @Sendable () -> Timestamp = { .now }, afterApple: (@Sendable (Planned) async throws -> Void)? = nil
    ) async throws -> Outcome {
        var outcome = Outcome(plan: plan)
        for planned in plan.planned {
            guard let target = targets.first(where: { $0.app == planned.target }) else { continue }
            guard planned.request.respondBy > clock() else {
                outcome.expired.append(planned)
                continue
            }
            let answer = ConsumptionRequests.Answer(
                target: planned.target, transactionId: planned.transactionId, notificationUUID: planned.request.notificationUUID,
                body: planned.body, answeredBy: answeredBy)
            var hook: (@Sendable () async throws -> Void)?
            if let afterApple { hook = { try await afterApple(planned) } }
            let delivery = try await ConsumptionAnswers.deliver(
                answer, again: false, client: target.client, origins: target.origins, database: database, afterApple: hook)
            switch delivery {
            case .settled: outcome.settled.append(planned)
            case .replied(_, nil): outcome.accepted.append(planned)
            case .replied(_, let failure?): outcome.failed.append((planned, failure))
            }
        }
        return outcome
    }

    /// The automatic answers of one moment, for each run and `serve`'s leader: the targets whose
    /// policy says `automatic: true` answer, as `policy`, their open requests whose `answerAfter`
    /// passed by `clock` and whose deadline has not (judged again at each request's turn); never an
    /// acked request, nor one answered already (by the app, a command or another sender). Each
    /// target with answers to send joins its app's budget (``Target/budget``) for as long as it
    /// sends them. The caller holds what makes it the one sender (a run's lease, the leader's
    /// lease); a second sender would still send nothing twice (``ConsumptionAnswers``).
    package static func answerDue(
        _ targets: [Target], clock: @escaping @Sendable () -> Timestamp = { .now }, database: Database
    ) async throws -> Outcome {
        let automatic = targets.filter(\.policy.automatic)
        guard !automatic.isEmpty else { return Outcome(plan: Plan()) }
        let plan = try await plan(automatic, at: clock(), waitForAnswerAfter: true, database: database)
        let sending = automatic.filter { target in plan.planned.contains { $0.target == target.app } }
        return try await sharingBudgets(of: sending[...], database: database) {
            try await respond(plan, targets: automatic, answeredBy: .policy, database: database, clock: clock)
        }
    }

    /// Runs `work` holding each target's share of its app's budget (those that have one to join).
    private static func sharingBudgets<Result: Sendable>(
        of targets: ArraySlice<Target>, database: Database, _ work: () async throws -> Result
    ) async throws -> Result {
        guard let target = targets.first else { return try await work() }
        if let lease = target.lease {
            try await lease.begin()
            do {
                let result = try await sharingBudgets(of: targets.dropFirst(), database: database, work)
                await lease.end()
                return result
            } catch {
                await lease.end()
                throw error
            }
        }
        guard let configuration = target.budget else { return try await sharingBudgets(of: targets.dropFirst(), database: database, work) }
        let budget = SharedBudget(configuration: configuration, database: database, limiter: target.client.rateLimiter, app: target.app)
        try await budget.join()
        return try await budget.keepingShared { try await sharingBudgets(of: targets.dropFirst(), database: database, work) }
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T?) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
