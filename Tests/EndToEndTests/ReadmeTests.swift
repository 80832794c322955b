import Foundation
import TestSupport
import Testing

@testable import Forwarder

/// The README as a user reads it.
@Suite struct ReadmeTests {
    /// The README's sample outputs (the drill, a run's report) are generated from a real run of the
    /// drill (`jobs/dev/readme-samples`), not typed; this runs the drill again on the tests' build
    /// and fails when a sample no longer matches what the code prints (figures, times and ids
    /// masked; lines and labels compared) or when the drill printed a warning.
    @Test func theSamplesAreWhatTheCodePrints() async throws {
        let script = Repository.root.appendingPathComponent("jobs/dev/readme-samples").path
        let result = try await runProcess(
            "/usr/bin/env", ["bash", script, "--check"], environment: ["DRILL_BIN": Executables.directory.path], timeout: .seconds(1200))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr.suffix(4000))")
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
