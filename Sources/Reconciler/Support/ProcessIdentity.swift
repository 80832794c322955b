import Foundation

/// Names this process in run leases and the customer queue: `host:pid:nonce`. The nonce tells a
/// restarted process with a reused pid from the one that held a lease before.
public enum ProcessIdentity {
    public static let current: String = {
        let info = ProcessInfo.processInfo
        return "\(info.hostName):\(info.processIdentifier):\(UInt32.random(in: 0...UInt32.max) % 100_000)"
    }()

    /// Whether `identity` names a process of this host that no longer exists.
    public static func isDeadOnThisHost(_ identity: String) -> Bool {
        let parts = identity.split(separator: ":")
        guard parts.count == 3, parts[0] == ProcessInfo.processInfo.hostName, let pid = Int32(parts[1]), pid > 0,
            pid != ProcessInfo.processInfo.processIdentifier
        else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}
