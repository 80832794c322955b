import Foundation
import TestSupport
import Testing

/// The README as a user reads it.
@Suite struct ReadmeTests {
    /// The README's sample outputs (the drill, a run's report) are generated from a real run of the
    /// drill (`jobs/dev/readme-samples`), not typed; this runs the drill again on the tests' build
    /// and fails when a sample no longer matches what the code prints (figures, times and ids
    /// masked; lines and labels compared) or when the drill printed a warning. The drill writes
    /// nothing into the checkout.
    @Test func theSamplesAreWhatTheCodePrints() async throws {
        let before = try await Repository.files()
        let script = Repository.root.appendingPathComponent("jobs/dev/readme-samples").path
        let result = try await runProcess(
            "/usr/bin/env", ["bash", script, "--check"], environment: ["DRILL_BIN": Executables.directory.path], timeout: .seconds(1200))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr.suffix(4000))")
        let written = try await Repository.files().subtracting(before)
        #expect(written.isEmpty, "the drill wrote into the checkout: \(written.sorted())")
    }

    /// "Your app in ten minutes" rehearsed as the README says to without a terminal: its
    /// **Rehearsal** blocks, in order, piped into `jobs/dev/with-postgres bash -e` (the first
    /// block, which builds and opens that shell, is what this test does). They print their
    /// temporary directory and free ports, end with `export` equal to the mock's truth, and write
    /// nothing into the checkout.
    @Test func theRehearsalRunsAsWrittenWithoutATerminal() async throws {
        let before = try await Repository.files()
        let blocks = try Self.rehearsalBlocks()
        #expect(blocks.count >= 6, "\(blocks)")
        let opener = blocks.first { $0.contains("jobs/dev/with-postgres bash") }
        #expect(opener != nil, "no block opens the shell: \(blocks)")
        let script = blocks.filter { $0 != opener }.joined(separator: "\n")
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let result = try await runProcess(
            "/usr/bin/env", ["bash", "-c", #"cd "$1" && exec jobs/dev/with-postgres bash -e"#, "rehearsal", Repository.root.path],
            environment: ["PATH": "\(Executables.directory.path):\(path)", "LOG_LEVEL": "warning"], stdin: Data(script.utf8),
            timeout: .seconds(900))
        // The rehearsal's directory stays for the reader; the test removes it.
        let directory = result.stdout.components(separatedBy: "\n").first { $0.hasPrefix("the rehearsal's files: ") }?
            .replacingOccurrences(of: "the rehearsal's files: ", with: "")
        if let directory, directory.hasPrefix("/tmp/reconciler-rehearsal.") { try? FileManager.default.removeItem(atPath: directory) }
        #expect(result.status == 0, "\(result.stdout.suffix(4000))\n\(result.stderr.suffix(4000))")
        #expect(directory != nil, "\(result.stdout)")
        #expect(result.stdout.contains("serve will listen on 127.0.0.1:"), "\(result.stdout)")
        #expect(result.stdout.contains("the mock App Store: http://127.0.0.1:"), "\(result.stdout)")
        #expect(result.stdout.contains("export equals the App Store's truth"), "\(result.stdout.suffix(4000))\n\(result.stderr.suffix(4000))")
        let written = try await Repository.files().subtracting(before)
        #expect(written.isEmpty, "the rehearsal wrote into the checkout: \(written.sorted())")
    }

    /// The ```sh blocks of "Your app in ten minutes" that follow a **Rehearsal** paragraph, up to
    /// the next step's heading.
    static func rehearsalBlocks() throws -> [String] {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "\n## Your app in ten minutes\n") else { return [] }
        let section = readme[start.upperBound...].components(separatedBy: "\n## ").first ?? ""
        var blocks: [String] = []
        var (rehearsing, block): (Bool, [String]?) = (false, nil)
        for line in section.components(separatedBy: "\n") {
            if var lines = block {
                if line == "```" {
                    if rehearsing { blocks.append(lines.joined(separator: "\n")) }
                    block = nil
                } else {
                    lines.append(line)
                    block = lines
                }
            } else if line == "```sh" {
                block = []
            } else if line.hasPrefix("### ") {
                rehearsing = false
            } else if line.hasPrefix("**Rehearsal") {
                rehearsing = true
            }
        }
        return blocks
    }
}
