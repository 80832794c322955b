package import AppStoreServer
package import CoreMetrics
import Foundation
package import Prometheus
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The metrics of one process: one Prometheus collector registry, the swift-metrics factory that
/// feeds it (bootstrap it as the process's backend, so any library's swift-metrics land here too),
/// and its two renderings: `serve`'s `GET /metrics` and `run --metrics-file`, a file for
/// node_exporter's textfile collector written atomically.
///
/// Every series carries the constant labels `environment` and `bundle_id`.
///
/// ```swift
/// let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production))
/// MetricsSystem.bootstrap(metrics.factory)                // once per process
/// MetricDefinition.runExitCode.gauge(["scheduled"], in: metrics).record(0)
/// try metrics.writeTextfile(to: "/var/lib/node_exporter/textfile_collector/reconciler.prom")
/// ```
package final class MetricsRegistry: Sendable {
    /// The labels every series carries, first, in this order.
    package static let constantLabelNames = ["environment", "bundle_id"]

    package let prometheus: PrometheusCollectorRegistry
    package let factory: CatalogMetricsFactory
    /// The app and environment of this registry's series (`nil`: the process's own, or one a
    /// notification names that could not be read); labels are their raw values, or empty.
    package let bundleId: String?
    package let environment: AppStoreEnvironment?
    /// The newest live notification's time: fed by the database (``LedgerMetrics``) and, in
    /// `serve`, by every notification the webhook stores (``WebhookMetrics``).
    package let newestLiveNotification: ForwardGauge

    /// The registries of the other apps and environments this process serves, by their labels.
    private let scopes: Mutex<[String: MetricsRegistry]>

    /// A registry whose series are labelled with `app` (a process of one app and environment).
    package convenience init(app: AppTarget) {
        self.init(bundleId: app.bundleId, environment: app.environment)
    }

    package convenience init(bundleId: String?, environment: AppStoreEnvironment?) {
        self.init(prometheus: PrometheusCollectorRegistry(), bundleId: bundleId, environment: environment)
    }

    private init(prometheus: PrometheusCollectorRegistry, bundleId: String?, environment: AppStoreEnvironment?) {
        self.environment = environment
        self.bundleId = bundleId
        self.prometheus = prometheus
        factory = CatalogMetricsFactory(
            registry: prometheus, constantLabels: [("environment", environment?.rawValue ?? ""), ("bundle_id", bundleId ?? "")])
        newestLiveNotification = ForwardGauge(.webhookLastNotification, factory: factory)
        scopes = Mutex([:])
    }

    /// The same process's metrics for another app and environment: one Prometheus registry, one
    /// exposition, series labelled with that app's `environment` and `bundle_id` (a `serve` or a
    /// `run` of several apps). The same labels always give the same registry.
    package func scoped(_ app: AppTarget) -> MetricsRegistry {
        scoped(bundleId: app.bundleId, environment: app.environment)
    }

    /// ``scoped(_:)`` for what a notification names, as far as it could be read.
    package func scoped(bundleId: String?, environment: AppStoreEnvironment?) -> MetricsRegistry {
        // Unread parts label as empty, so `nil` and "" are the same series.
        let (bundleId, environment) = (bundleId ?? "", environment?.rawValue ?? "")
        if environment == self.environment?.rawValue ?? "", bundleId == self.bundleId ?? "" { return self }
        return scopes.withLock { scopes in
            let key = "\(environment)\u{0}\(bundleId)"
            if let existing = scopes[key] { return existing }
            let scoped = MetricsRegistry(
                prometheus: prometheus, bundleId: bundleId.isEmpty ? nil : bundleId,
                environment: environment.isEmpty ? nil : AppStoreEnvironment(rawValue: environment))
            scopes[key] = scoped
            return scoped
        }
    }

    /// Prometheus text exposition format (version 0.0.4) of every metric created so far, families
    /// sorted by name and the series of a counter or gauge by their labels (the registry emits
    /// them in hash order), so the same state always reads the same.
    package func exposition() -> String {
        // The registry writes each family as one block: `# HELP` (when it has help), `# TYPE`, samples.
        var blocks: [(name: String, type: String, lines: [Substring])] = []
        for line in prometheus.emitToString().split(separator: "\n") {
            let comment = line.split(separator: " ", maxSplits: 3)
            if comment.count >= 3, comment[0] == "#", comment[1] == "HELP" || comment[1] == "TYPE" {
                if blocks.last?.name != String(comment[2]) { blocks.append((String(comment[2]), "", [])) }
                if comment[1] == "TYPE", comment.count == 4 { blocks[blocks.count - 1].type = String(comment[3]) }
                blocks[blocks.count - 1].lines.append(line)
            } else if blocks.isEmpty {
                blocks.append(("", "", [line]))
            } else {
                blocks[blocks.count - 1].lines.append(line)
            }
        }
        var text = ""
        for block in blocks.sorted(by: { $0.name < $1.name }) {
            let header = block.lines.prefix { $0.hasPrefix("#") }
            let samples = block.lines.dropFirst(header.count)
            // Histogram buckets keep their order; a counter's or a gauge's series have none.
            let ordered = block.type == "counter" || block.type == "gauge" ? samples.sorted() : Array(samples)
            for line in header + ordered { text += line + "\n" }
        }
        return text
    }

    /// The content type of ``exposition()``.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Writes ``exposition()`` to `path` as node_exporter's textfile collector needs it: into a
    /// temporary file beside it (same directory, a name the collector ignores), flushed, then
    /// renamed over `path`, so a scrape sees the old file or the new one, never half of one.
    package func writeTextfile(to path: String) throws {
        let target = URL(fileURLWithPath: path)
        let temporary = target.deletingLastPathComponent()
            .appendingPathComponent(".\(target.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).tmp")
        do {
            // Readable by node_exporter, which runs as another user; the file holds no secret.
            guard FileManager.default.createFile(atPath: temporary.path, contents: nil, attributes: [.posixPermissions: 0o644]) else {
                throw TextfileError(path: path, reason: "cannot create \(temporary.path)")
            }
            let handle = try FileHandle(forWritingTo: temporary)
            do {
                try handle.write(contentsOf: Data(exposition().utf8))
                try handle.synchronize()
                try handle.close()
            } catch {
                try? handle.close()
                throw error
            }
            guard rename(temporary.path, target.path) == 0 else {
                throw TextfileError(path: path, reason: String(cString: strerror(errno)))
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            if let error = error as? TextfileError { throw error }
            throw TextfileError(path: path, reason: error.localizedDescription)
        }
    }

    /// The metrics file could not be written.
    package struct TextfileError: Error, CustomStringConvertible {
        package var path: String
        package var reason: String
        package var description: String { "cannot write the metrics file \(path): \(reason)" }
    }
}

/// A gauge that only moves forward (a time fed from several sources), created with its first
/// value: until then the series is absent, since a gauge at 0 would read as "in 1970".
package final class ForwardGauge: Sendable {
    private let definition: MetricDefinition
    private let factory: CatalogMetricsFactory
    private let state = Mutex<(value: Double, gauge: CoreMetrics.Gauge?)>((0, nil))

    init(_ definition: MetricDefinition, factory: CatalogMetricsFactory) {
        self.definition = definition
        self.factory = factory
    }

    /// The value, once there is one.
    package var value: Double? { state.withLock { $0.gauge == nil ? nil : $0.value } }

    /// Sets the gauge to `value` unless it already holds a later one.
    package func advance(to value: Double) {
        state.withLock { state in
            guard state.gauge == nil || value > state.value else { return }
            let gauge = state.gauge ?? CoreMetrics.Gauge(label: definition.name, dimensions: [], factory: factory)
            state = (value, gauge)
            gauge.record(value)
        }
    }
}

extension MetricDefinition {
    /// This family's counter with these label values (in the order of ``labels``).
    package func counter(_ labelValues: [String] = [], in metrics: MetricsRegistry) -> CoreMetrics.Counter {
        assert(kind == .counter, "\(name) is a \(kind.rawValue)")
        return CoreMetrics.Counter(label: name, dimensions: dimensions(labelValues), factory: metrics.factory)
    }

    /// This family's gauge with these label values (in the order of ``labels``).
    package func gauge(_ labelValues: [String] = [], in metrics: MetricsRegistry) -> CoreMetrics.Gauge {
        assert(kind == .gauge, "\(name) is a \(kind.rawValue)")
        return CoreMetrics.Gauge(label: name, dimensions: dimensions(labelValues), factory: metrics.factory)
    }

    func dimensions(_ values: [String]) -> [(String, String)] {
        precondition(values.count == labels.count, "\(name) has the labels \(labels), got \(values.count) values")
        return Array(zip(labels, values))
    }
}

/// A swift-metrics backend over a ``PrometheusCollectorRegistry`` that adds the process's constant
/// labels to every metric and gives the reconciler's own families (``MetricDefinition/all``)
/// their help text; anything else (a library's metrics) goes through swift-prometheus's
/// `PrometheusMetricsFactory` unchanged but for the constant labels.
package struct CatalogMetricsFactory: MetricsFactory, Sendable {
    let registry: PrometheusCollectorRegistry
    let constantLabels: [(String, String)]
    private let fallback: PrometheusMetricsFactory

    init(registry: PrometheusCollectorRegistry, constantLabels: [(String, String)]) {
        self.registry = registry
        self.constantLabels = constantLabels
        fallback = PrometheusMetricsFactory(registry: registry)
    }

    /// The catalog's family for `label`, checked against how it is used.
    private func definition(_ label: String, _ kind: MetricDefinition.Kind, _ dimensions: [(String, String)]) -> MetricDescriptor? {
        guard let definition = MetricDefinition.named(label) else { return nil }
        assert(definition.kind == kind, "\(label) is a \(definition.kind.rawValue), not a \(kind.rawValue)")
        assert(dimensions.map(\.0) == definition.labels, "\(label) has the labels \(definition.labels), got \(dimensions.map(\.0))")
        return MetricDescriptor(
            name: MetricNameDescriptor(metricName: label, unitName: "", helpText: definition.help),
            labels: constantLabels + dimensions)
    }

    private struct MetricDescriptor {
        var name: MetricNameDescriptor
        var labels: [(String, String)]
    }

    package func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let known = definition(label, .counter, dimensions) else {
            return fallback.makeCounter(label: label, dimensions: constantLabels + dimensions)
        }
        return registry.makeCounter(descriptor: known.name, labels: known.labels)
    }

    package func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        guard let known = definition(label, .counter, dimensions) else {
            return fallback.makeFloatingPointCounter(label: label, dimensions: constantLabels + dimensions)
        }
        return registry.makeCounter(descriptor: known.name, labels: known.labels)
    }

    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard !aggregate, let known = definition(label, .gauge, dimensions) else {
            return fallback.makeRecorder(label: label, dimensions: constantLabels + dimensions, aggregate: aggregate)
        }
        return registry.makeGauge(descriptor: known.name, labels: known.labels)
    }

    package func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        guard let known = definition(label, .gauge, dimensions) else {
            return fallback.makeMeter(label: label, dimensions: constantLabels + dimensions)
        }
        return registry.makeGauge(descriptor: known.name, labels: known.labels)
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        fallback.makeTimer(label: label, dimensions: constantLabels + dimensions)
    }

    package func destroyCounter(_ handler: any CounterHandler) { fallback.destroyCounter(handler) }
    package func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { fallback.destroyFloatingPointCounter(handler) }
    package func destroyRecorder(_ handler: any RecorderHandler) { fallback.destroyRecorder(handler) }
    package func destroyMeter(_ handler: any MeterHandler) { fallback.destroyMeter(handler) }
    package func destroyTimer(_ handler: any TimerHandler) { fallback.destroyTimer(handler) }
}
