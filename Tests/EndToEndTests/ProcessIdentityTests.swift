import AppStoreServer
import Foundation
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// Processes judged dead by their PID only within their own PID namespace.
@Suite struct ProcessIdentityTests {
    /// The pid of a process that has exited (and been reaped).
    static func goneProcessIdentifier() async throws -> Int32 {
        let gone = try RunningProcess("/bin/true", [])
        _ = try await gone.wait()
        return gone.process.processIdentifier
    }

    /// A gone pid is judged dead only in an identity of this host, PID namespace and boot; the
    /// same pid from another namespace, another boot, or in the earlier `host:pid:nonce` form is not.
    @Test func onlyIdentitiesOfThisPIDNamespaceAreJudgedByTheirPID() async throws {
        let host = ProcessInfo.processInfo.hostName
        let namespace = try #require(ProcessIdentity.namespace)
        let boot = try #require(namespace.split(separator: ":").last)
        let gone = try await Self.goneProcessIdentifier()
        #expect(ProcessIdentity.isDeadOnThisHost("\(host):\(gone):1:\(namespace)"))
        #expect(!ProcessIdentity.isDeadOnThisHost("\(host):\(gone):1:4026530000:\(boot)"))
        #expect(!ProcessIdentity.isDeadOnThisHost("\(host):\(gone):1:\(namespace.split(separator: ":")[0]):00000000-0000-0000-0000-000000000000"))
        #expect(!ProcessIdentity.isDeadOnThisHost("\(host):\(gone):1"))
        #expect(!ProcessIdentity.isDeadOnThisHost("elsewhere:\(gone):1:\(namespace)"))
        // A live process of this namespace is not dead, nor is this one.
        #expect(!ProcessIdentity.isDeadOnThisHost("\(host):1:1:\(namespace)"))
        #expect(!ProcessIdentity.isDeadOnThisHost(ProcessIdentity.current))
    }

    /// A `reconciler run` in a second PID namespace with the same host name (a container beside
    /// this one) finds no process with this process's PID, yet this process is alive and holds
    /// the run lease: the run must not take it over.
    @Test(.enabled(if: getuid() == 0, "unshare --pid needs root"))
    func aLeaseHeldFromAnotherPIDNamespaceIsNotTakenOver() async throws {
        try await Rehearsal.with(customers: 10, seed: 101) { rehearsal in
            let bundleId = try #require(rehearsal.environment["APP_STORE_BUNDLE_ID"])
            let ledger = RunLedger(database: rehearsal.db.database)
            let lease = RunLease(configuration: .init(), ledger: ledger)
            let child = try await lease.withLease(app: AppTarget(bundleId: bundleId, environment: .production)) { _ in
                try await runProcess(
                    "/usr/bin/unshare",
                    [
                        "--pid", "--fork", "--mount-proc", Executables.url("reconciler").path, "run", "--start", rehearsal.outageStart, "--end",
                        rehearsal.outageEnd,
                    ],
                    environment: rehearsal.environment)
            }
            #expect(child.status == 1, "\(child.stdout)\n\(child.stderr)")
            #expect(child.stderr.contains("holds the lease"), "\(child.stderr)")
        }
    }

}
