import Foundation

/// Headless Chromium (Debian's `chromium` package) loading a file from disk, for the report page
/// tests. A machine without it fails those tests: CI installs it (`.ci/run`).
package enum Chromium {
    package struct Missing: Error, CustomStringConvertible {
        package var description: String {
            "headless Chromium is needed to test the report page: neither `chromium` nor `chromium-browser` is on PATH "
                + "(Debian: apt-get install chromium; .ci/run installs it)"
        }
    }

    /// A page after its scripts ran.
    package struct LoadedPage {
        /// The DOM serialised (`--dump-dom`).
        package var dom: String
        /// What the page logged to the console (`CONSOLE` lines of Chromium's log): errors, uncaught exceptions, console calls.
        package var console: [String]
    }

    package static func executable() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for name in ["chromium", "chromium-browser"] {
            for directory in path.split(separator: ":") {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        throw Missing()
    }

    /// Loads `url` (a `file://` URL) and returns its DOM and console messages.
    package static func load(_ url: String) async throws -> LoadedPage {
        let result = try await run(["--enable-logging=stderr", "--v=0", "--dump-dom", url])
        let console = result.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }.map(String.init)
        return LoadedPage(dom: result.stdout, console: console)
    }

    /// Renders `url` into a PNG of `width` × `height` pixels at `path`.
    package static func screenshot(_ url: String, to path: String, width: Int = 1200, height: Int = 2400) async throws {
        _ = try await run(["--hide-scrollbars", "--window-size=\(width),\(height)", "--screenshot=\(path)", url])
        guard FileManager.default.fileExists(atPath: path) else { throw ProcessFailure(description: "chromium wrote no screenshot at \(path)") }
    }

    private static func run(_ arguments: [String]) async throws -> ProcessResult {
        try await TemporaryDirectory.with("chromium") { profile in try await run(arguments, profile: profile) }
    }

    private static func run(_ arguments: [String], profile: TemporaryDirectory) async throws -> ProcessResult {
        let result = try await runProcess(
            try executable(),
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--user-data-dir=\(profile.path)",
            ] + arguments, environment: ["HOME": profile.path])
        guard result.status == 0 else {
            throw ProcessFailure(description: "chromium exited \(result.status): \(result.stderr.suffix(2000))")
        }
        return result
    }
}
