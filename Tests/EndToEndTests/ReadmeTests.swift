import Foundation
import TestSupport
import Testing

@testable import Forwarder

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

    /// "Your app in ten minutes" rehearsed as a newcomer follows it, without a terminal: the
    /// README's own **Rehearsal** blocks, taken from its text, in order, piped into
    /// `jobs/dev/with-postgres bash -e` started in a fresh scratch directory (the first block,
    /// which builds the tools and opens that shell with them first on its PATH, is what this test
    /// does, with the tests' build). One app in production and the sandbox, configured by the file
    /// the rehearsal writes as step 2 says (its non-renewing term included): the blocks print their
    /// temporary directory and free ports, answer a consumption request the outage left open, and
    /// end with `export` equal to the mock's truth on the first try; nothing is written into the
    /// checkout or the scratch directory.
    @Test func theRehearsalRunsAsWrittenFromAScratchDirectory() async throws {
        let before = try await Repository.files()
        let blocks = try Self.rehearsalBlocks()
        #expect(blocks.count >= 8, "\(blocks)")
        let opener = try #require(blocks.first { $0.contains("jobs/dev/with-postgres bash") }, "no block opens the shell: \(blocks)")
        #expect(opener.contains("PATH="), "the opening block puts the tools it built on the shell's PATH: \(opener)")
        let script = blocks.filter { $0 != opener }.joined(separator: "\n")
        // Step 2 for the reader's app and for the mock's: every non-renewing product gets its term,
        // or its purchases' `entitled` is unknown and the final comparison fails.
        let configuration = try Self.section("### 2. The configuration")
        #expect(configuration.contains("nonRenewingTerms:"), "\(configuration)")
        #expect(script.contains("nonRenewingTerms:"), "\(script)")
        #expect(script.contains("environments: [production, sandbox]"), "\(script)")
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let withPostgres = Repository.root.appendingPathComponent("jobs/dev/with-postgres").path
        let result = try await TemporaryDirectory.with("rehearsal-scratch") { scratch in
            let result = try await runProcess(
                "/usr/bin/env", ["bash", "-c", #"cd "$1" && exec "$2" bash -e"#, "rehearsal", scratch.path, withPostgres],
                environment: ["PATH": "\(Executables.directory.path):\(path)", "LOG_LEVEL": "warning"], stdin: Data(script.utf8),
                timeout: .seconds(900))
            let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path)
            #expect(left.isEmpty, "the rehearsal wrote into the directory it started in: \(left)")
            return result
        }
        // The rehearsal's directory stays for the reader; the test removes it.
        let directory = result.stdout.components(separatedBy: "\n").first { $0.hasPrefix("the rehearsal's files: ") }?
            .replacingOccurrences(of: "the rehearsal's files: ", with: "")
        if let directory, directory.hasPrefix("/tmp/reconciler-rehearsal.") { try? FileManager.default.removeItem(atPath: directory) }
        #expect(result.status == 0, "\(result.stdout.suffix(4000))\n\(result.stderr.suffix(4000))")
        #expect(directory != nil, "\(result.stdout)")
        #expect(result.stdout.contains("serve will listen on 127.0.0.1:"), "\(result.stdout)")
        #expect(result.stdout.contains("the mock App Store: http://127.0.0.1:"), "\(result.stdout)")
        #expect(result.stdout.contains("its sandbox: http://127.0.0.1:"), "\(result.stdout)")
        #expect(result.stdout.contains("== com.example.one (Sandbox)"), "the run recovers the sandbox too: \(result.stdout.suffix(4000))")
        #expect(result.stdout.contains("accepted: Apple received the consumption information"), "\(result.stdout.suffix(4000))")
        #expect(!result.stdout.contains("entitled unknown"), "a purchase's entitled is unknown: \(result.stdout.suffix(4000))")
        #expect(result.stdout.contains("export equals the App Store's truth"), "\(result.stdout.suffix(4000))\n\(result.stderr.suffix(4000))")
        let written = try await Repository.files().subtracting(before)
        #expect(written.isEmpty, "the rehearsal wrote into the checkout: \(written.sorted())")
    }

    /// A part of "Your app in ten minutes", from its heading to the next.
    static func section(_ heading: String) throws -> String {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "\n\(heading)\n") else { return "" }
        return readme[start.upperBound...].components(separatedBy: "\n### ").first?.components(separatedBy: "\n## ").first ?? ""
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

    /// A request to an app's handler, as a signature check gets it.
    struct SignedRequest: Encodable {
        var what: String
        var headers: [String: String]
        /// Base64.
        var body: String
        var secret: String
        var genuine: Bool
    }

    /// The signature checks the documentation gives the app's handler (Python, JavaScript), each
    /// run as written against what the forwarder signs (``Forwarder/signature(body:secret:at:)``)
    /// and what it did not: unsigned (a stranger's request, or Apple's own), forged, for another
    /// body, too old, malformed. Each answers true for the genuine ones and false, without
    /// raising, for every other.
    @Test(arguments: [("python", "def from_reconciler"), ("js", "function fromReconciler")])
    func theSignatureChecksAcceptWhatTheForwarderSignedAndRefuseTheRest(language: String, definition: String) async throws {
        let snippet = try #require(try Self.codeBlocks(language).first { $0.contains(definition) }, "no \(language) block with \(definition)")
        let (secret, body) = ("s3cret-\(UUID().uuidString)", Forwarder.body(signedPayload: "eyJhbGciOiJFUzI1NiJ9.eyJ9.c2ln"))
        let now = Date()
        let signed = Forwarder.signature(body: body, secret: ForwardingSecret(secret), at: now)
        let fields = Dictionary(
            uniqueKeysWithValues: signed.split(separator: ",").map { $0.split(separator: "=", maxSplits: 1).map(String.init) }.map { ($0[0], $0[1]) })
        let (t, v1) = (try #require(fields["t"]), try #require(fields["v1"]))
        func request(_ what: String, _ header: String?, body: Data = body, genuine: Bool = false) -> SignedRequest {
            SignedRequest(
                what: what, headers: header.map { ["Reconciler-Signature": $0] } ?? ["Content-Type": "application/json"],
                body: body.base64EncodedString(), secret: secret, genuine: genuine)
        }
        let requests = [
            request("signed", signed, genuine: true),
            request("unsigned", nil),
            request("empty header", ""),
            request("forged: another secret", Forwarder.signature(body: body, secret: ForwardingSecret("guess"), at: now)),
            request("another body", signed, body: Forwarder.body(signedPayload: "eyJhbGciOiJFUzI1NiJ9.eyJ4In0.c2ln")),
            request("signed an hour ago", Forwarder.signature(body: body, secret: ForwardingSecret(secret), at: now - 3600)),
            request("signed an hour ahead", Forwarder.signature(body: body, secret: ForwardingSecret(secret), at: now + 3600)),
            request("no v1", "t=\(t)"),
            request("no t", "v1=\(v1)"),
            request("not a number", "t=soon,v1=\(v1)"),
            request("not hex", "t=\(t),v1=\(String(repeating: "z", count: 64))"),
            request("not ASCII", "t=\(t),v1=\(String(repeating: "é", count: 64))"),
            request("garbage", "garbage"),
        ]
        let source: String
        let interpreter: String
        switch language {
        case "python":
            interpreter = "python3"
            source =
                snippet + """

                    base64, json, sys = (__import__(name) for name in ("base64", "json", "sys"))
                    for case in json.load(sys.stdin):
                        print(json.dumps(from_reconciler(case["headers"], base64.b64decode(case["body"]), case["secret"].encode())))
                    """
        default:
            interpreter = "node"
            // Node gives a handler its request's header names in lower case.
            source =
                snippet + """

                    const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
                    for (const c of cases) {
                      const headers = Object.fromEntries(Object.entries(c.headers).map(([name, value]) => [name.toLowerCase(), value]));
                      console.log(JSON.stringify(fromReconciler(headers, Buffer.from(c.body, "base64"), c.secret)));
                    }
                    """
        }
        try await TemporaryDirectory.with("signature-check") { directory in
            let program = directory.file("check.\(language)")
            try source.write(toFile: program, atomically: true, encoding: .utf8)
            let result = try await runProcess(
                "/usr/bin/env", [interpreter, program], stdin: try JSONEncoder().encode(requests), timeout: .seconds(60))
            #expect(result.status == 0, "\(result.stderr)")
            let answers = result.stdout.split(separator: "\n").map(String.init)
            #expect(answers.count == requests.count, "\(result.stdout)\n\(result.stderr)")
            for (request, answer) in zip(requests, answers) {
                #expect(answer == (request.genuine ? "true" : "false"), "\(language): \(request.what) answered \(answer)")
            }
        }
    }

    /// The fenced code blocks of `language` in the README and the documents beside it.
    static func codeBlocks(_ language: String) throws -> [String] {
        let docs = Repository.root.appendingPathComponent("docs")
        let files =
            [Repository.root.appendingPathComponent("README.md")]
            + ((try? FileManager.default.contentsOfDirectory(at: docs, includingPropertiesForKeys: nil)) ?? []).filter { $0.pathExtension == "md" }
        var blocks: [String] = []
        for file in files {
            var current: [Substring]?
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
                if let lines = current {
                    if line.hasPrefix("```") {
                        blocks.append(lines.joined(separator: "\n"))
                        current = nil
                    } else {
                        current = lines + [line]
                    }
                } else if line == "```\(language)" {
                    current = []
                }
            }
        }
        return blocks
    }
}
