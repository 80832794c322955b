package import AppStoreServer
import Foundation
package import Logging
import ReconcilerDomain

#if canImport(Glibc)
import Glibc
#endif

/// The bearer tokens the app API accepts: `appApi.tokenFile`, one token per line (blank lines and
/// lines starting with `#` are skipped), read again whenever the file changes (its inode, size or
/// modification time: a rewrite, or the swap a Kubernetes Secret update makes), so tokens rotate
/// without a restart. The file is looked at (`stat`) at most once per `recheckInterval` (default
/// 1 s, on an injected clock), not on every request: a rotation is taken within that second. A
/// file that cannot be read any more keeps the tokens last read (and says so in the log, at most
/// once per interval); an empty one accepts none. Tokens are compared in constant time and never
/// logged.
///
/// ```swift
/// let tokens = try AppAPITokens(path: "/run/secrets/app-api-tokens", logger: logger)
/// tokens.accepts(authorization: request.headers[.authorization])
/// ```
package final class AppAPITokens: Sendable {
    package let path: String
    private let logger: Logger
    private let clock: any MonotonicClock
    private let recheckInterval: Duration
    private let state: Locked<State>

    private struct State {
        var file: FileIdentity?
        var tokens: [[UInt8]]
        /// When the file was last looked at (`clock.now`).
        var looked: Duration
    }

    /// What tells a rewritten file from the one last read.
    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var modifiedNanoseconds: Int64
        var changed: Int64
        var changedNanoseconds: Int64
    }

    /// Reads the file now: a file that cannot be read, or that lists no token, is a configuration
    /// error (`serve` refuses to start with it).
    package init(path: String, logger: Logger, clock: any MonotonicClock = .system, recheckInterval: Duration = .seconds(1)) throws {
        self.path = path
        self.logger = logger
        self.clock = clock
        self.recheckInterval = recheckInterval
        guard let (file, tokens) = Self.read(path) else {
            throw ReconcilerError(
                .unreadable, "appApi.tokenFile: \(path) does not exist or cannot be read; write the app's bearer token there, one per line")
        }
        guard !tokens.isEmpty else {
            throw ReconcilerError(.invalidValue, "appApi.tokenFile: \(path) lists no token (one per line; lines starting with # are comments)")
        }
        state = Locked(State(file: file, tokens: tokens, looked: clock.now))
    }

    /// Whether an `Authorization` header carries `Bearer` and a listed token.
    package func accepts(authorization: String?) -> Bool {
        guard let presented = Self.bearerToken(authorization) else { return false }
        let presentedBytes = Array(presented.utf8)
        // Every listed token is compared, whichever matches: the time taken says nothing of which.
        var accepted = false
        for token in current() where Self.constantTimeEqual(token, presentedBytes) { accepted = true }
        return accepted
    }

    /// The tokens as the file lists them: those last read within `recheckInterval` of the last
    /// look; else the file is looked at, and read again when it is not the one last read.
    private func current() -> [[UInt8]] {
        let now = clock.now
        let recent = state.withLock { state -> [[UInt8]]? in
            guard now - state.looked >= recheckInterval else { return state.tokens }
            state.looked = now
            return nil
        }
        if let recent { return recent }
        let identity = Self.identity(of: path)
        let known = state.withLock { $0.file == identity && identity != nil ? $0.tokens : nil }
        if let known { return known }
        guard let (file, tokens) = Self.read(path) else {
            logger.warning("app API token file cannot be read; keeping the tokens last read", metadata: ["tokenFile": "\(path)"])
            return state.withLock { $0.tokens }
        }
        state.withLock { $0 = State(file: file, tokens: tokens, looked: now) }
        logger.info("app API token file read again", metadata: ["tokenFile": "\(path)", "tokens": "\(tokens.count)"])
        return tokens
    }

    private static func read(_ path: String) -> (FileIdentity?, [[UInt8]])? {
        let before = identity(of: path)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        // Judged by the identity seen before reading: a rewrite while reading is read again next time.
        return (before, tokens(in: String(decoding: data, as: UTF8.self)))
    }

    /// One token per line; blank lines and `#` comments skipped, spaces around a token dropped.
    static func tokens(in text: String) -> [[UInt8]] {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }.map { Array($0.utf8) }
    }

    /// The token of `Bearer <token>` (the scheme in any letter case, RFC 9110), or `nil`.
    static func bearerToken(_ authorization: String?) -> Substring? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].drop { $0 == " " }
        return token.isEmpty ? nil : token
    }

    /// Equal bytes, in time that depends on the lengths only.
    static func constantTimeEqual(_ left: [UInt8], _ right: [UInt8]) -> Bool {
        var difference: UInt8 = left.count == right.count ? 0 : 1
        for index in 0..<max(left.count, right.count) {
            difference |= (index < left.count ? left[index] : 0) ^ (index < right.count ? right[index] : 0)
        }
        return difference == 0
    }

    private static func identity(of path: String) -> FileIdentity? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileIdentity(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size), modified: Int64(status.st_mtim.tv_sec),
            modifiedNanoseconds: Int64(status.st_mtim.tv_nsec), changed: Int64(status.st_ctim.tv_sec),
            changedNanoseconds: Int64(status.st_ctim.tv_nsec))
    }
}
