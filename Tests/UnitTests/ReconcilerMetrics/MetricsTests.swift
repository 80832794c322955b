import AppStoreServer
import CoreMetrics
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerStore
import TestSupport
import Testing

/// The metrics catalog, its rendering (one registry, Prometheus text, the textfile), and that the
/// reference (docs/reference.md), the alert rules and the Grafana dashboard name only metrics the registry produces.
@Suite struct MetricsTests: MetricsTesting {
    static let prometheusDirectory = Repository.root.appendingPathComponent("jobs/deploy/prometheus")

    /// node_exporter reads the file at any moment: it is replaced whole, never written in place.
    @Test func theTextfileIsReplacedAtomically() throws {
        let directory = try TemporaryDirectory.create("textfile")
        defer { directory.remove() }
        let path = directory.file("reconciler.prom")
        let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .sandbox))
        MetricDefinition.runExitCode.gauge(["scheduled"], in: metrics).record(2)
        try metrics.writeTextfile(to: path)
        MetricDefinition.runExitCode.gauge(["scheduled"], in: metrics).record(0)
        try metrics.writeTextfile(to: path)
        let parsed = try PrometheusText(parsing: try String(contentsOfFile: path, encoding: .utf8))
        #expect(parsed.value("reconciler_run_exit_code", ["kind": "scheduled", "environment": "Sandbox"]) == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["reconciler.prom"])
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o644)

        let missing = directory.file("no/such/dir/reconciler.prom")
        #expect(throws: MetricsRegistry.TextfileError.self) { try metrics.writeTextfile(to: missing) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["reconciler.prom"])
    }

    /// An invocation stopped before any run (configuration, database) still tells alerts its exit code.
    @Test func aRunWithoutAReportStillHasItsExitCode() throws {
        let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production))
        let end = Date(timeIntervalSince1970: 1_795_000_000)
        RunMetrics.record(exitCode: 1, kind: .scheduled, report: nil, endedAt: end, in: metrics)
        let parsed = try PrometheusText(parsing: metrics.exposition())
        #expect(parsed.value("reconciler_run_exit_code", ["kind": "scheduled"]) == 1)
        #expect(parsed.value("reconciler_run_end_timestamp_seconds", ["kind": "scheduled"]) == 1_795_000_000)
        #expect(parsed.samples("reconciler_run_status").isEmpty)
        #expect(parsed.samples("reconciler_run_duration_seconds").isEmpty)
    }

    /// Every metric name in the alert rules (and their tests' input series) and in the dashboard's
    /// queries is one the registry produces.
    @Test func theAlertRulesAndTheDashboardUseOnlyMetricsThatExist() throws {
        let produced = Set(try PrometheusText(parsing: Self.everyMetric().1).families.keys)
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.prometheusDirectory.path).sorted()
        let ruleFiles = files.filter { $0.hasSuffix(".rules.yml") }
        let testFiles = files.filter { $0.hasSuffix(".yml") && $0.contains("test") }
        let dashboards = files.filter { $0.hasSuffix(".json") }
        #expect(!ruleFiles.isEmpty && !testFiles.isEmpty && !dashboards.isEmpty, "\(files)")

        var used: [String: Set<String>] = [:]  // metric name → files
        for file in ruleFiles + testFiles {
            let text = try String(contentsOf: Self.prometheusDirectory.appendingPathComponent(file), encoding: .utf8)
            let expressions = PromQL.yamlValues(of: "expr", in: text)
            let series = PromQL.yamlValues(of: "series", in: text)
            #expect(!expressions.isEmpty || !file.hasSuffix(".rules.yml"), "\(file): no expr found")
            #expect(!series.isEmpty || file.hasSuffix(".rules.yml"), "\(file): no input series found")
            for expression in expressions { for name in PromQL.metricNames(in: expression) { used[name, default: []].insert(file) } }
            for selector in series { for name in PromQL.metricNames(in: selector) { used[name, default: []].insert(file) } }
        }
        for file in dashboards {
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.prometheusDirectory.appendingPathComponent(file)))
            let queries = PromQL.dashboardQueries(json)
            #expect(queries.count >= 10, "\(file): \(queries.count) queries")
            for query in queries { for name in PromQL.metricNames(in: query) { used[name, default: []].insert(file) } }
        }
        let unknown = used.filter { !produced.contains($0.key) }
        #expect(unknown.isEmpty, "names the registry does not produce: \(unknown.map { "\($0.key) in \($0.value.sorted())" }.sorted())")
        // The alerts watch these; the dashboard shows them.
        for name in [
            "reconciler_webhook_last_notification_timestamp_seconds", "reconciler_run_exit_code",
            "reconciler_quarantined_payloads_unacknowledged", "reconciler_last_finished_run_timestamp_seconds",
        ] {
            #expect(used[name]?.contains { $0.hasSuffix(".rules.yml") } == true, "\(name) in no rule")
            #expect(used[name]?.contains { $0.hasSuffix(".json") } == true, "\(name) on no dashboard panel")
        }
    }

    /// The unit tests beside the rules make every alert fire at least once and stay quiet at least once.
    @Test func everyAlertIsTestedFiringAndNotFiring() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.prometheusDirectory.path)
        var alerts = Set<String>()
        var firing = Set<String>(), quiet = Set<String>()
        for file in files where file.hasSuffix(".yml") {
            let lines = try String(contentsOf: Self.prometheusDirectory.appendingPathComponent(file), encoding: .utf8)
                .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            for (index, line) in lines.enumerated() {
                if file.hasSuffix(".rules.yml"), line.hasPrefix("- alert:") { alerts.insert(line.dropFirst(8).trimmingCharacters(in: .whitespaces)) }
                guard file.contains("test"), line.hasPrefix("alertname:") else { continue }
                let name = line.dropFirst(10).trimmingCharacters(in: .whitespaces)
                guard let expected = lines[(index + 1)...].first(where: { $0.hasPrefix("exp_alerts:") }) else { continue }
                if expected == "exp_alerts: []" { quiet.insert(name) } else { firing.insert(name) }
            }
        }
        #expect(alerts.count >= 4, "\(alerts)")
        #expect(alerts.subtracting(firing).isEmpty, "never tested firing: \(alerts.subtracting(firing).sorted())")
        #expect(alerts.subtracting(quiet).isEmpty, "never tested quiet: \(alerts.subtracting(quiet).sorted())")
    }

    /// The reference's metrics table (docs/reference.md) lists exactly the catalog, with each family's
    /// type, labels and processes.
    @Test func theReferenceDocumentsEveryMetric() throws {
        let reference = try String(contentsOf: Repository.root.appendingPathComponent("docs/reference.md"), encoding: .utf8)
        let section = try #require(reference.components(separatedBy: "\n## Metrics").dropFirst().first?.components(separatedBy: "\n## ").first)
        // The section's first table.
        let table = section.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        var documented: [String: [String]] = [:]
        for line in table where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = Array(cells.dropFirst())
        }
        let catalog = Set(MetricDefinition.all.map(\.name))
        let referenceOnly = Set(documented.keys).subtracting(catalog).sorted(), catalogOnly = catalog.subtracting(documented.keys).sorted()
        #expect(referenceOnly.isEmpty && catalogOnly.isEmpty, "reference only: \(referenceOnly); catalog only: \(catalogOnly)")
        for definition in MetricDefinition.all {
            guard let cells = documented[definition.name], cells.count >= 4 else { continue }
            #expect(cells[0] == definition.kind.rawValue, "\(definition.name): type")
            let labels = cells[1].split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) }.filter {
                !$0.isEmpty && $0 != "—"
            }
            #expect(labels == definition.labels, "\(definition.name): labels \(labels)")
            let processes = Set(cells[3].split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) })
            #expect(processes == Set(definition.processes.map(\.rawValue)), "\(definition.name): processes \(processes)")
        }
    }

}

/// Just enough PromQL reading to find the metric names an expression selects.
enum PromQL {
    static let keywords: Set<String> = [
        "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN",
    ]

    /// Metric names in `expression`: identifiers outside strings, label matchers and ranges, that are
    /// not functions, aggregations, keywords or the label lists of `by (...)` and the like.
    static func metricNames(in expression: String) -> Set<String> {
        var text = expression
        for pattern in [#/"(?:[^"\\]|\\.)*"/#, #/'(?:[^'\\]|\\.)*'/#, #/`[^`]*`/#, #/\{[^}]*\}/#, #/\[[^\]]*\]/#] {
            text = text.replacing(pattern, with: " ")
        }
        text = text.replacing(#/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/#, with: " ")
        var names = Set<String>()
        let characters = Array(text)
        func isStart(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c == "_" || c == ":") }
        func isPart(_ c: Character) -> Bool { isStart(c) || (c.isASCII && c.isNumber) }
        var index = 0
        while index < characters.count {
            // An identifier starts after something that cannot be part of a name, a number or a variable.
            guard isStart(characters[index]),
                index == 0 || !(isPart(characters[index - 1]) || characters[index - 1] == "." || characters[index - 1] == "$")
            else {
                index += 1
                continue
            }
            var end = index
            while end < characters.count, isPart(characters[end]) { end += 1 }
            let name = String(characters[index..<end])
            var next = end
            while next < characters.count, characters[next].isWhitespace { next += 1 }
            if !(next < characters.count && characters[next] == "(") && !keywords.contains(name) { names.insert(name) }
            index = end
        }
        return names
    }

    /// The values of `key:` in a YAML file: inline (quoted or not) or a `|`/`>` block.
    static func yamlValues(of key: String, in yaml: String) -> [String] {
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var values: [String] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.drop { $0 == " " || $0 == "-" }
            index += 1
            guard trimmed.hasPrefix("\(key):") else { continue }
            var value = trimmed.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("|") || value.hasPrefix(">") {
                let indent = line.prefix { $0 == " " || $0 == "-" }.count
                var block: [String] = []
                while index < lines.count,
                    lines[index].trimmingCharacters(in: .whitespaces).isEmpty
                        || lines[index].prefix(while: { $0 == " " }).count > indent
                {
                    block.append(lines[index])
                    index += 1
                }
                value = block.joined(separator: "\n")
            } else if let quote = value.first, quote == "'" || quote == "\"", value.last == quote, value.count >= 2 {
                value = String(value.dropFirst().dropLast())
                if quote == "'" { value = value.replacingOccurrences(of: "''", with: "'") }
            }
            if !value.isEmpty { values.append(value) }
        }
        return values
    }

    /// Every query of a Grafana dashboard: the panels' targets' `expr` and the template variables'
    /// queries (`label_values(selector, label)` counts as its selector).
    static func dashboardQueries(_ json: Any) -> [String] {
        var queries: [String] = []
        func walk(_ value: Any, key: String?) {
            if let object = value as? [String: Any] {
                for (childKey, child) in object { walk(child, key: childKey) }
            } else if let array = value as? [Any] {
                for child in array { walk(child, key: key) }
            } else if let string = value as? String, key == "expr" || key == "query" {
                if let match = string.wholeMatch(of: #/\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*/#) {
                    queries.append(String(match.1))
                } else if key == "expr" || string.contains("(") || string.contains("reconciler_") {
                    queries.append(string)
                }
            }
        }
        walk(json, key: nil)
        return queries
    }
}
