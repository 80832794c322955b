package import Foundation

/// A directory of a test's own under the system's temporary directory (`TMPDIR`, else /tmp), removed
/// with everything in it when the test is done with it, also when the test fails: the only way the
/// tests make temporary files, so a run leaves nothing behind in /tmp.
///
/// ```swift
/// try await TemporaryDirectory.with { directory in
///     let report = directory.file("report.json")
///     let run = try await runProcess("reconciler", ["run", "--report-json", report])
/// }
/// ```
package struct TemporaryDirectory: Sendable {
    /// The directory.
    package let url: URL

    package var path: String { url.path }

    /// A path in the directory (nothing is created there).
    package func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Creates a new, empty directory; `remove()` deletes it. Prefer `with`, which always removes it.
    /// - Parameter prefix: the start of its name, to tell whose it is when a test is debugged.
    package static func create(_ prefix: String = "test", permissions: Int = 0o700) throws -> TemporaryDirectory {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: permissions])
        return TemporaryDirectory(url: url)
    }

    /// Deletes the directory and everything in it.
    package func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Runs `body` with a new directory, then removes it, whether `body` returns or throws.
    package static func with<T>(_ prefix: String = "test", _ body: (TemporaryDirectory) async throws -> T) async throws -> T {
        let directory = try create(prefix)
        defer { directory.remove() }
        return try await body(directory)
    }

    /// Runs `body` with a new directory, then removes it, whether `body` returns or throws.
    package static func with<T>(_ prefix: String = "test", _ body: (TemporaryDirectory) throws -> T) throws -> T {
        let directory = try create(prefix)
        defer { directory.remove() }
        return try body(directory)
    }
}
