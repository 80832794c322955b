import Reconciler
import ReconcilerDomain
import Testing

@testable import ReconcilerStore

/// Which outcome decides an exit code (no database): configuration over retryable over attention,
/// and what a run's stored status says.
@Suite struct ExitClassTests {
    @Test func configurationPressesOverRetryableOverAttention() {
        #expect(ExitClass.mostPressing([ExitClass.recovered, .attention, .retryable, .configuration]) == 3)
        #expect(ExitClass.mostPressing([ExitClass.attention, .retryable, .recovered]) == 1)
        #expect(ExitClass.mostPressing([ExitClass.recovered, .attention]) == 1)
        #expect(ExitClass.mostPressing([ExitClass.recovered, .recovered]) == nil)
        #expect(ExitClass.mostPressing([ExitClass]()) == nil)
        // The first of equals wins: the app listed first is the one named.
        #expect(ExitClass.mostPressing([ExitClass.retryable, .retryable]) == 0)
        // Exit codes, as the commands hold them: a code of no class (3 is ranked by no rule) never wins.
        #expect(ExitClass.mostPressing([Int32(0), 4, 2]) == 2)
        #expect(ExitClass.mostPressing([Int32(3), 0, 7]) == nil)
    }

    @Test func aRunsStatusSaysWhetherItIsRetriedOrNeedsAPerson() {
        let classes = Dictionary(uniqueKeysWithValues: RunRecord.Status.allCases.map { ($0, ExitClass(runStatus: $0)) })
        #expect(classes[.partial] == .retryable && classes[.interrupted] == .retryable && classes[.failed] == .retryable)
        #expect(classes[.succeededWithRejections] == .attention && classes[.lost] == .attention)
        #expect(classes[.succeeded] == .recovered)
        #expect(ExitClass.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
    }
}
