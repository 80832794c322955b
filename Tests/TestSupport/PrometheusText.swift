import Foundation

/// A strict reader of Prometheus's text exposition format (0.0.4), for the metrics tests: every
/// line must be a comment, `# HELP`, `# TYPE` or a sample; names, label names and label values
/// (with their escapes) must be well formed; a family's HELP and TYPE appear once and before its
/// samples; a family's lines are contiguous; no series appears twice; the text ends with a newline.
/// `promtool check metrics` checks the same text too where it is installed.
package struct PrometheusText {
    package struct Sample: Hashable {
        package var name: String
        package var labels: [String: String]
        package var value: Double
    }

    package struct Family {
        package var name: String
        package var type: String?
        package var help: String?
        package var samples: [Sample] = []
    }

    package struct ParseError: Error, CustomStringConvertible {
        package var line: Int
        package var reason: String
        package var text: String
        package var description: String { "line \(line): \(reason): \(text)" }
    }

    package private(set) var families: [String: Family] = [:]

    package init(parsing text: String) throws {
        guard text.isEmpty || text.hasSuffix("\n") else { throw ParseError(line: 0, reason: "the text does not end with a newline", text: "") }
        var finished = Set<String>()  // families whose group of lines ended
        var current: String?
        var series = Set<String>()
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let line = String(rawLine)
            func fail(_ reason: String) -> ParseError { ParseError(line: index + 1, reason: reason, text: line) }
            func enter(_ family: String) throws {
                guard family != current else { return }
                guard !finished.contains(family) else { throw fail("the lines of \(family) are not contiguous") }
                if let current { finished.insert(current) }
                current = family
            }
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard parts.count >= 3, parts[1] == "HELP" || parts[1] == "TYPE" else { continue }  // a plain comment
                let name = parts[2]
                guard Self.isMetricName(name) else { throw fail("invalid metric name") }
                try enter(name)
                var family = families[name] ?? Family(name: name)
                if parts[1] == "HELP" {
                    guard family.help == nil else { throw fail("a second HELP") }
                    family.help =
                        parts.count > 3 ? parts[3].replacingOccurrences(of: "\\n", with: "\n").replacingOccurrences(of: "\\\\", with: "\\") : ""
                } else {
                    guard family.type == nil else { throw fail("a second TYPE") }
                    guard family.samples.isEmpty else { throw fail("TYPE after samples") }
                    guard parts.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else {
                        throw fail("invalid TYPE")
                    }
                    family.type = parts[3]
                }
                families[name] = family
                continue
            }
            let sample = try Self.sample(line, fail: fail)
            let familyName = families[sample.name] != nil ? sample.name : Self.histogramFamily(of: sample.name, in: families) ?? sample.name
            try enter(familyName)
            let key = sample.name + "{" + sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}"
            guard series.insert(key).inserted else { throw fail("a series appears twice") }
            families[familyName, default: Family(name: familyName)].samples.append(sample)
        }
    }

    /// The value of the one sample of `name` whose labels include `labels`; nil when there is none.
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples(name).filter { sample in labels.allSatisfy { sample.labels[$0.key] == $0.value } }
        return matching.count == 1 ? matching[0].value : nil
    }

    package func samples(_ name: String) -> [Sample] {
        families.values.flatMap(\.samples).filter { $0.name == name }
    }

    package static func isMetricName(_ name: String) -> Bool {
        name.wholeMatch(of: /[a-zA-Z_:][a-zA-Z0-9_:]*/) != nil
    }

    private static func histogramFamily(of sampleName: String, in families: [String: Family]) -> String? {
        for suffix in ["_bucket", "_sum", "_count"] where sampleName.hasSuffix(suffix) {
            let base = String(sampleName.dropLast(suffix.count))
            if let type = families[base]?.type, type == "histogram" || type == "summary" { return base }
        }
        return nil
    }

    private static func sample(_ line: String, fail: (String) -> ParseError) throws -> Sample {
        var rest = Substring(line)
        let name = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" })
        guard isMetricName(name), name.allSatisfy(\.isASCII) else { throw fail("invalid metric name") }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let labelName = String(rest.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
                guard labelName.wholeMatch(of: /[a-zA-Z_][a-zA-Z0-9_]*/) != nil else { throw fail("invalid label name") }
                rest = rest.dropFirst(labelName.count)
                guard rest.hasPrefix("=\"") else { throw fail("expected =\" after \(labelName)") }
                rest = rest.dropFirst(2)
                var value = ""
                while true {
                    guard let character = rest.first else { throw fail("unterminated label value") }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        switch rest.first {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw fail("invalid escape in a label value")
                        }
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                guard labels.updateValue(value, forKey: labelName) == nil else { throw fail("label \(labelName) twice") }
                if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" { throw fail("expected , or }") }
            }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ", omittingEmptySubsequences: true)
        guard rest.first == " ", (1...2).contains(fields.count) else { throw fail("expected a value and an optional timestamp") }
        let value: Double
        switch fields[0] {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default:
            guard let number = Double(fields[0]), fields[0].wholeMatch(of: /[-+]?[0-9.]+([eE][-+]?[0-9]+)?/) != nil else {
                throw fail("invalid value")
            }
            value = number
        }
        if fields.count == 2, Int64(fields[1]) == nil { throw fail("invalid timestamp") }
        return Sample(name: name, labels: labels, value: value)
    }
}

/// Prometheus's `promtool` (Debian's `prometheus` package), for `promtool check metrics`. A machine
/// without it fails the tests that use it: CI installs it (`.ci/run`).
package enum Promtool {
    package struct Missing: Error, CustomStringConvertible {
        package var description: String {
            "promtool is needed to check the metrics' exposition format: it is not on PATH (Debian: apt-get install prometheus; .ci/run installs it)"
        }
    }

    package static func executable() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/promtool"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Missing()
    }

    /// `promtool check metrics` on `text` (its parser and its linter: names, units, `_total`, help texts).
    package static func checkMetrics(_ text: String) async throws -> ProcessResult {
        try await runProcess(try executable(), ["check", "metrics"], stdin: Data(text.utf8))
    }
}
