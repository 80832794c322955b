import AppStoreServer
import CoreMetrics
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import TestSupport
import Testing

/// Every family of the catalog renders with its type, help and labels, as text `promtool check
/// metrics` accepts.
@Suite struct MetricsTests: MetricsTesting {

    @Test func everyFamilyRendersWithItsTypeHelpAndLabels() async throws {
        let (metrics, text) = Self.everyMetric()
        // A label value that needs every escape the format has.
        MetricDefinition.runNotifications.gauge(["FUTURE \"TYPE\"\\SUB\nTYPE", "applied"], in: metrics).record(2)
        let exposition = metrics.exposition()
        let parsed = try PrometheusText(parsing: exposition)
        #expect(Set(parsed.families.keys) == Set(MetricDefinition.all.map(\.name)), "\(text)")
        for definition in MetricDefinition.all {
            let family = try #require(parsed.families[definition.name], "\(definition.name)")
            #expect(family.type == definition.kind.rawValue, "\(definition.name)")
            #expect(family.help == definition.help, "\(definition.name)")
            for sample in family.samples {
                #expect(Set(sample.labels.keys) == Set(MetricsRegistry.constantLabelNames + definition.labels), "\(definition.name)")
                #expect(sample.labels["environment"] == "Production" && sample.labels["bundle_id"] == "com.example.app")
            }
        }
        #expect(parsed.value("reconciler_run_notifications", ["type": "FUTURE \"TYPE\"\\SUB\nTYPE"]) == 2)
        #expect(Set(MetricDefinition.all.map(\.name)).count == MetricDefinition.all.count, "a name twice in the catalog")

        let promtool = try await Promtool.checkMetrics(exposition)
        #expect(promtool.status == 0, "promtool check metrics: \(promtool.stdout)\(promtool.stderr)")
    }

}
