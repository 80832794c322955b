package import Foundation

/// The repository the tests run in, for the tests that read its files (migrations/, jobs/, README.md).
package enum Repository {
    /// Its root, where Package.swift is (this file is Tests/TestSupport/Repository.swift).
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}
