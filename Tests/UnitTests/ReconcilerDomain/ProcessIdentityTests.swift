import AppStoreServer
import Foundation
import ReconcilerDomain
import Testing

@testable import Reconciler

/// Processes judged dead by their PID only within their own PID namespace.
@Suite struct ProcessIdentityTests {
    /// This process's identity carries its PID namespace and boot.
    @Test func theIdentityNamesThePIDNamespaceAndTheBoot() throws {
        let parts = ProcessIdentity.current.split(separator: ":", omittingEmptySubsequences: false)
        try #require(parts.count == 5, "\(ProcessIdentity.current)")
        #expect(parts[0] == ProcessInfo.processInfo.hostName)
        #expect(Int32(parts[1]) == ProcessInfo.processInfo.processIdentifier)
        // The namespace's link reads `pid:[INODE]`.
        let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
        #expect("pid:[\(parts[3])]" == namespace)
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(parts[4] == boot)
    }

}
