import Foundation

#if canImport(Glibc)
import Glibc  // stat() and st_ino
#endif

/// Names this process in leases (the run lease, the customer queue, forwarding deliveries, the
/// shared budget): `host:pid:nonce:pidns:bootid`, e.g.
/// `worker-7:4242:1234:4026532301:3c6a02da-0316-4dba-8a32-b02f5757d8d4`. The nonce tells a
/// restarted process with a reused pid from the one that held a lease before. The PID namespace
/// (the inode of `/proc/self/ns/pid`) and the boot (`/proc/sys/kernel/random/boot_id`) say where
/// the pid means this process: containers that share a host name but not a PID namespace each
/// see other processes under the same pids.
package enum ProcessIdentity {
    package static let current: String = {
        let info = ProcessInfo.processInfo
        let nonce = UInt32.random(in: 0...UInt32.max) % 100_000
        return [info.hostName, "\(info.processIdentifier)", "\(nonce)", namespace].compactMap { $0 }.joined(separator: ":")
    }()

    /// This process's PID namespace and boot, `pidns:bootid`; `nil` where `/proc` does not tell
    /// (not Linux), and then no identity is judged by its pid.
    package static let namespace: String? = {
        var info = stat()
        guard stat("/proc/self/ns/pid", &info) == 0,
            let boot = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines),
            !boot.isEmpty, !boot.contains(":")
        else { return nil }
        return "\(info.st_ino):\(boot)"
    }()

    /// An identity as a table shows it, `host:pid` (the whole one is in `--json` output): the
    /// nonce and namespace tell processes apart for leases, not for a reader.
    package static func short(_ identity: String) -> String {
        identity.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).prefix(2).joined(separator: ":")
    }

    /// Whether `identity` names a process that no longer exists: only an identity of this host
    /// name, PID namespace and boot is judged, by whether its pid is gone. Any other (another
    /// machine, another container's PID namespace, an earlier boot, or the `host:pid:nonce` form
    /// of earlier versions that does not say its namespace) is never judged dead here: its lease
    /// is waited out.
    package static func isDeadOnThisHost(_ identity: String) -> Bool {
        let parts = identity.split(separator: ":", omittingEmptySubsequences: false)
        guard let namespace, parts.count == 5, parts[0] == ProcessInfo.processInfo.hostName, "\(parts[3]):\(parts[4])" == namespace,
            let pid = Int32(parts[1]), pid > 0, pid != ProcessInfo.processInfo.processIdentifier
        else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}
