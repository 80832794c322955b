package import Foundation

/// The repository the tests run in, for the tests that read its files (migrations/, jobs/, README.md).
package enum Repository {
    /// Its root, where Package.swift is (this file is Tests/TestSupport/Repository.swift).
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

extension Repository {
    /// What `git status` lists in the checkout, untracked and ignored entries included (an ignored
    /// directory as one entry): a test that must write nothing into the checkout compares this set
    /// before and after.
    package static func files() async throws -> Set<String> {
        let result = try await runProcess(
            "/usr/bin/env", ["git", "-C", root.path, "status", "--porcelain", "--ignored", "--untracked-files=normal"])
        guard result.status == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "git status: \(result.stderr)"])
        }
        return Set(result.stdout.split(separator: "\n").map(String.init))
    }
}
