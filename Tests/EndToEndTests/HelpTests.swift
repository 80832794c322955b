import Foundation
import ReconcilerShared
import TestSupport
import Testing

/// `--help` as a user reads it: every command of both executables, subcommands included, at the
/// width a terminal usually has.
@Suite struct HelpTests {
    /// Every command's help, rendered by the real executables at 80 columns, and each subcommand's
    /// in turn (found in its parent's SUBCOMMANDS section): no option says its default twice (the
    /// `(default: X)` ArgumentParser adds beside a hand-written "default ..."), and no example
    /// command of a discussion is cut mid-line by the wrapping.
    @Test func everyCommandsHelpSaysEachDefaultOnceAndKeepsItsExamplesWhole() async throws {
        var problems: [String] = []
        var rendered = 0
        for tool in ["reconciler", "mock-appstore"] {
            var pending: [[String]] = [[]]
            while let path = pending.popLast() {
                let command = ([tool] + path).joined(separator: " ")
                let result = try await runProcess(tool, path + ["--help"], environment: ["COLUMNS": "80"], timeout: .seconds(60))
                #expect(result.status == 0, "\(command) --help: \(result.stderr)")
                rendered += 1
                problems += HelpText.doubledDefaults(result.stdout).map { "\(command) --help: \($0)" }
                problems += HelpText.brokenExampleLines(result.stdout).map { "\(command) --help: \($0)" }
                pending += HelpText.subcommands(result.stdout).map { path + [$0] }
            }
        }
        // reconciler's 17 commands and consumption's 3, mock-appstore's 2: the walk found them.
        #expect(rendered >= 22, "rendered only \(rendered) help texts")
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    /// The checks themselves, on text cut the way ArgumentParser's wrapping cuts it.
    @Test func theChecksFindWhatTheyLookFor() {
        let help = """
            OVERVIEW: Does things.

            Examples:

              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z
            --report-json report.json
              reconciler consumption send --transaction-id 1 \\
            --customer-consented
              reconciler status                 # whole

            USAGE: reconciler run [--overlap <duration>]

            OPTIONS:
              --overlap <duration>    Overlap for --since-last (default 1h). (default: 1h)
              --concurrency <n>       Shards paged at once. (default: 8)
              --end <T>               End of the window (default now).
              --lease-duration <duration>
                                      How long the lease lasts (default 30s).
                                      (default: 30s)

            SUBCOMMANDS:
              list                    List them.
              simulate (default)      Simulate.

              See 'reconciler help <subcommand>' for detailed help.
            """
        #expect(HelpText.doubledDefaults(help).count == 2)
        #expect(HelpText.brokenExampleLines(help).count == 2)
        #expect(HelpText.subcommands(help) == ["list", "simulate"])
    }

    /// `--version` prints the one version both executables are built with.
    @Test func bothExecutablesPrintTheirVersion() async throws {
        for tool in ["reconciler", "mock-appstore"] {
            let result = try await runProcess(tool, ["--version"], timeout: .seconds(60))
            #expect(result.status == 0, "\(tool) --version: \(result.stderr)")
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == ReconcilerVersion.current, "\(tool): \(result.stdout)")
        }
    }

    /// The top-level help says where the apps come from (the configuration file), and the run's
    /// help names the metrics file where the README and the deploy files put it.
    @Test func theHelpNamesTheConfigurationAndTheMetricsFileAsTheReadmeDoes() async throws {
        let top = try await runProcess("reconciler", ["--help"], timeout: .seconds(60))
        #expect(top.stdout.contains("--config"), "\(top.stdout)")
        #expect(top.stdout.contains("RECONCILER_CONFIG"), "\(top.stdout)")
        let run = try await runProcess("reconciler", ["run", "--help"], environment: ["COLUMNS": "200"], timeout: .seconds(60))
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        let paths = { (text: String) in
            Set(
                text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "`" }).filter { $0.hasSuffix(".prom") && $0.hasPrefix("/") }.map(
                    String.init))
        }
        #expect(!paths(run.stdout).isEmpty, "\(run.stdout)")
        #expect(paths(run.stdout).isSubset(of: paths(readme)), "run --help: \(paths(run.stdout)); README: \(paths(readme))")
    }
}

/// Reading a rendered `--help`.
enum HelpText {
    /// Options whose text has ArgumentParser's `(default: X)` and a hand-written default too.
    static func doubledDefaults(_ help: String) -> [String] {
        options(help).compactMap { option in
            guard let added = option.range(of: "(default: ", options: .backwards) else { return nil }
            let written = option[..<added.lowerBound]
            return written.range(of: #"\bdefault\b"#, options: [.regularExpression, .caseInsensitive]) == nil ? nil : "default twice: \(option)"
        }
    }

    /// Lines of the overview (abstract and discussion) that continue an example command cut by the
    /// wrapping: an indented line (an example) followed at once by a line at the margin, or a
    /// line ending in `\` not followed by an indented one.
    static func brokenExampleLines(_ help: String) -> [String] {
        let overview = help.components(separatedBy: "\nUSAGE:").first ?? help
        let lines = overview.components(separatedBy: "\n")
        var broken: [String] = []
        for (line, next) in zip(lines, lines.dropFirst()) where line.hasPrefix("  ") && !next.isEmpty && !next.hasPrefix("  ") {
            broken.append("an example cut mid-line: \"\(line)\" / \"\(next)\"")
        }
        return broken
    }

    /// The subcommands a help lists (without the `(default)` mark).
    static func subcommands(_ help: String) -> [String] {
        guard let start = help.range(of: "SUBCOMMANDS:\n") else { return [] }
        var names: [String] = []
        for line in help[start.upperBound...].components(separatedBy: "\n") {
            guard line.hasPrefix("  "), !line.hasPrefix("  See ") else { break }
            if let name = line.split(separator: " ").first, !line.hasPrefix("   ") { names.append(String(name)) }
        }
        return names
    }

    /// Each option's entry of the OPTIONS sections, its lines joined.
    private static func options(_ help: String) -> [String] {
        var entries: [String] = []
        var inOptions = false
        for line in help.components(separatedBy: "\n") {
            // A section's title: OPTIONS:, or an option group's (FORWARDING:); not SUBCOMMANDS:.
            if line.range(of: #"^[A-Z][A-Z ]*:$"#, options: .regularExpression) != nil {
                inOptions = line != "SUBCOMMANDS:"
                continue
            }
            guard inOptions, !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            if line.hasPrefix("  -") {
                entries.append(line.trimmingCharacters(in: .whitespaces))
            } else if line.hasPrefix("   "), !entries.isEmpty {
                entries[entries.count - 1] += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        return entries
    }
}
