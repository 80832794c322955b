package import AppStoreServer
import Foundation
import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// The schedule's chain of windows (`run --since-last`): which unfinished scheduled windows an
/// invocation retries, which it gives up as lost to Apple's retention, and the newest window it
/// always recovers, from where the chain ended (minus the overlap) to now.
///
/// A window that stays unfinished (a customer whose history keeps failing) never freezes the
/// schedule: it is retried by every invocation until it finishes, its failing customers and shards
/// are given up (see ``GiveUpPolicy``), or it leaves Apple's retention; the newest window is
/// recovered regardless.
///
/// ```swift
/// let plan = ScheduleChain.plan(.init(unfinished: unfinished, newestScheduled: newest, ...), overlap: .hours(1), now: .now, retention: .days(180))
/// for run in plan.lost { ... }     // mark lost, loudly
/// for run in plan.retry { ... }    // rerun in its own window
/// recover(plan.next)             // always
/// ```
package enum ScheduleChain {
    /// What the ledger knows about the chain.
    package struct State: Sendable {
        /// Unfinished scheduled (not dry) runs, oldest first.
        package var unfinished: [RunRecord]
        /// The newest scheduled (not dry) run, finished or not: the chain ends where its window ends.
        package var newestScheduled: RunRecord?
        /// Without a scheduled run yet: the end of the newest finished run of another kind.
        package var lastFinishedEnd: Timestamp?
        /// Without any finished run: the signedDate of the newest notification the live webhook stored.
        package var newestLiveNotification: Timestamp?

        package init(unfinished: [RunRecord], newestScheduled: RunRecord?, lastFinishedEnd: Timestamp?, newestLiveNotification: Timestamp?) {
            self.unfinished = unfinished
            self.newestScheduled = newestScheduled
            self.lastFinishedEnd = lastFinishedEnd
            self.newestLiveNotification = newestLiveNotification
        }
    }

    /// Where the newest window starts from.
    package enum Origin: String, Sendable {
        case previousScheduledWindow = "the previous scheduled window"
        case lastFinishedRun = "the last finished run"
        case newestLiveNotification = "the newest live notification"
        /// No run and no live notification of the app and environment yet (a new app, a sandbox
        /// without traffic): the chain starts now, less the overlap, so the schedule never fails
        /// for want of a start; what came before needs a window given by hand.
        case firstWindow = "nothing yet (the chain starts now, less the overlap)"
    }

    package struct Plan: Sendable {
        /// Unfinished windows whose start left Apple's retention: given up as lost.
        package var lost: [RunRecord] = []
        /// Unfinished windows to retry first, oldest first, each in its own window.
        package var retry: [RunRecord] = []
        /// The windows of ``retry`` in the last tenth of Apple's retention (3 days in the sandbox,
        /// 18 in production): warned about while there is time to act.
        package var nearingRetentionEdge: [RunRecord] = []
        /// The newest window: from the chain's end, less the overlap, to now.
        package var next = TimeWindow(start: .init(millisecondsSince1970: 0), end: .init(millisecondsSince1970: 0))
        package var origin: Origin = .firstWindow
        /// The newest window would have started before Apple's retention, and was moved to its edge.
        package var clippedToRetention = false
    }

    /// - Parameters:
    ///   - overlap: how far before the chain's end the newest window starts.
    ///   - retention: how far back Apple's notification history reaches in the environment.
    package static func plan(_ state: State, overlap: Duration, now: Timestamp, retention: Duration) -> Plan {
        // A minute's margin: a window starting right at the edge would be refused by the time its request is sent.
        let oldestServed = now - retention + .seconds(60)
        var plan = Plan()
        for run in state.unfinished {
            if run.window.start < oldestServed {
                plan.lost.append(run)
            } else {
                plan.retry.append(run)
                if run.window.start < now - retention + retention / 10 { plan.nearingRetentionEdge.append(run) }
            }
        }
        let chainEnd: Timestamp
        if let newest = state.newestScheduled {
            (chainEnd, plan.origin) = (newest.window.end, .previousScheduledWindow)
        } else if let end = state.lastFinishedEnd {
            (chainEnd, plan.origin) = (end, .lastFinishedRun)
        } else if let live = state.newestLiveNotification {
            (chainEnd, plan.origin) = (live, .newestLiveNotification)
        } else {
            (chainEnd, plan.origin) = (now, .firstWindow)
        }
        var start = chainEnd - overlap
        if start < oldestServed {
            start = oldestServed
            plan.clippedToRetention = true
        }
        // A chain that ends in the future (a clock set back) still recovers a window up to now.
        plan.next = TimeWindow(start: min(start, now - .milliseconds(1)), end: now)
        return plan
    }
}

extension ScheduleChain {
    /// Reads the chain of one app and environment from the ledger and plans this invocation
    /// (``plan(_:overlap:now:retention:)``); the windows it finds lost to Apple's retention are
    /// recorded as lost, unless this is a dry run.
    ///
    /// ```swift
    /// let plan = try await ScheduleChain.prepare(target, overlap: .hours(1), dryRun: false, database: database)
    /// ```
    package static func prepare(
        _ target: AppTarget, overlap: Duration, dryRun: Bool, database: Database, now: Timestamp = .now
    ) async throws -> Plan {
        let ledger = RunLedger(database: database)
        let store = PurchaseStore(logger: database.logger)
        let state = State(
            unfinished: try await ledger.unfinishedScheduledRuns(app: target),
            newestScheduled: try await ledger.newestScheduledRun(app: target),
            lastFinishedEnd: try await ledger.lastFinished(app: target)?.windowEnd,
            newestLiveNotification: try await database.transaction { transaction in
                try await store.notifications.newestLive(of: target, on: transaction)
            })
        let plan = plan(state, overlap: overlap, now: now, retention: ReconcileRun.retention(target.environment))
        if !dryRun {
            for lost in plan.lost {
                try await ledger.finish(
                    runId: lost.runId, status: .lost, failure: "its window left Apple's retention before it was finished",
                    apiStatistics: .zero, report: nil)
            }
        }
        return plan
    }
}
