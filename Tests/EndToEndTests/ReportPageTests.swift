import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import ReportPage
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The incident report page, written by real `reconciler` processes from a real
/// PostgreSQL after a rehearsed outage, loaded from disk by headless Chromium.
@Suite(.serialized) struct ReportPageTests {
    /// A run over an outage with forged payloads and injected 429s writes the page; Chromium renders
    /// it without an error; its rows, totals and charts match the JSON report; the search box
    /// filters; `status --run ID --html` writes the same page.
    @Test func aRunWritesAnIncidentReportPageThatChromiumRendersWithoutErrors() async throws {
        try await Rehearsal.with(customers: 60, seed: 83, mockArguments: ["--forged", "2", "--fault-429", "0.05"]) { rehearsal in
            // A path the page cannot be written to is refused before anything runs.
            let nowhere = try await rehearsal.runWindow(["--report-html", "/nonexistent-\(UUID().uuidString)/page.html"])
            #expect(nowhere.status == 1, "\(nowhere.stdout)\n\(nowhere.stderr)")
            #expect(nowhere.stderr.contains("--report-html"), "\(nowhere.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 0)

            let pagePath = rehearsal.file("incident.html"), jsonPath = rehearsal.file("report.json")
            let run = try await rehearsal.runWindow(["--report-html", pagePath, "--report-json", jsonPath])
            #expect(run.status == 4, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stdout.contains("incident report page: \(pagePath)"))
            let report = try Rehearsal.report(jsonPath)
            let html = try String(contentsOfFile: pagePath, encoding: .utf8)
            Self.expectSelfContained(html)

            let page = try await Chromium.load("file://\(pagePath)")
            Self.expectRenderedWithoutErrors(page)
            let dom = page.dom
            #expect(Self.attribute("data-status", in: dom).first == report["status"] as? String)

            // Every change and rejection has its row.
            let changes = report["changes"] as? [[String: Any]] ?? []
            let rejections = report["rejections"] as? [[String: Any]] ?? []
            #expect(!changes.isEmpty)
            #expect(rejections.count == 2)
            #expect(Self.occurrences(of: "<tr class=\"change\"", in: dom) == changes.count)
            #expect(Self.occurrences(of: "<tr class=\"rejection\"", in: dom) == rejections.count)
            let types = report["notificationsByType"] as? [String: Any] ?? [:]
            #expect(Self.occurrences(of: "<tr class=\"type", in: dom) == types.count)

            // The totals are the report's.
            let totals = Self.totals(in: dom)
            let notifications = report["notifications"] as? [String: Int] ?? [:]
            let api = report["api"] as? [String: Int] ?? [:]
            for outcome in ["seen", "applied", "duplicate", "stale", "recorded", "rejected"] {
                #expect(totals["notifications.\(outcome)"] == notifications[outcome].map(String.init), "notifications.\(outcome)")
            }
            for key in ["requests", "retries", "rateLimited", "serverErrors", "transportErrors"] {
                #expect(totals["api.\(key)"] == api[key].map(String.init), "api.\(key)")
            }
            for key in ["customersChecked", "transactionsFetched", "pages", "shardsTotal"] {
                #expect(totals[key] == (report[key] as? Int).map(String.init), "\(key)")
            }
            #expect(totals["changes"] == String(changes.count))
            #expect(totals["rejections"] == String(rejections.count))
            #expect(totals["status"] == (report["status"] as? String)?.uppercased())

            // The charts: every notification the run recorded is in a bar on both axes, urgent types
            // are highlighted, and the API bars add up to the run's requests, 429s and retries.
            #expect(dom.contains("<svg id=\"chart-notifications\""))
            let recorded = (notifications["applied"] ?? 0) + (notifications["stale"] ?? 0) + (notifications["recorded"] ?? 0)
            #expect(recorded > 0)
            #expect(Self.attribute("data-signed-count", in: dom).compactMap(Int.init).reduce(0, +) == recorded)
            #expect(Self.attribute("data-applied-count", in: dom).compactMap(Int.init).reduce(0, +) == recorded)
            let urgentLabels = Self.texts(after: "<text class=\"label u\"", in: dom)
            #expect(urgentLabels.contains("DID_RENEW"), "\(urgentLabels)")
            #expect(urgentLabels.allSatisfy { $0.hasPrefix("DID_RENEW") || $0.hasPrefix("EXPIRED") }, "\(urgentLabels)")
            #expect(!Self.texts(after: "<text class=\"label\"", in: dom).contains { $0.hasPrefix("DID_RENEW") || $0.hasPrefix("EXPIRED") })
            let endpointCharts = Self.occurrences(of: "class=\"chart chart-api\"", in: dom)
            #expect(endpointCharts >= 2, "Get Notification History and Get Transaction History")
            #expect(Self.occurrences(of: "class=\"budget\"", in: dom) == endpointCharts)
            #expect((api["rateLimited"] ?? 0) > 0, "the mock injected no 429")
            #expect(Self.attribute("data-requests", in: dom).compactMap(Int.init).reduce(0, +) == api["requests"])
            #expect(Self.attribute("data-rate-limited", in: dom).compactMap(Int.init).reduce(0, +) == api["rateLimited"])
            #expect(Self.attribute("data-retries", in: dom).compactMap(Int.init).reduce(0, +) == api["retries"])
            #expect(Self.occurrences(of: "class=\"m429\"", in: dom) > 0)

            // The search box: `#q=` fills it in and the script hides the rows that do not match.
            let query = try #require(changes.first?["originalTransactionId"] as? String)
            let matching = try changes.filter { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self).contains(query) }
                .count
            let searched = try await Chromium.load("file://\(pagePath)#q=\(query)")
            Self.expectRenderedWithoutErrors(searched)
            #expect(matching >= 1)
            #expect(Self.occurrences(of: "<tr class=\"change\">", in: searched.dom) == matching)
            #expect(Self.occurrences(of: "<tr class=\"change\" hidden=\"\">", in: searched.dom) == changes.count - matching)
            #expect(searched.dom.contains("<span id=\"changes-shown\">\(matching)</span>"))
            let nothing = try await Chromium.load("file://\(pagePath)#q=no-such-purchase")
            #expect(Self.occurrences(of: "<tr class=\"change\">", in: nothing.dom) == 0)
            #expect(nothing.dom.contains("<p id=\"changes-none\" class=\"note\">"))

            let screenshot = rehearsal.file("report-page.png")
            try await Chromium.screenshot("file://\(pagePath)", to: screenshot)
            let png = try Data(contentsOf: URL(fileURLWithPath: screenshot))
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            print("report page screenshot (test artifact): \(screenshot)")

            // The same page from `status`, later; --html alone is a usage error.
            let statusPath = rehearsal.file("status.html")
            let status = try await rehearsal.reconciler(["status", "--run", "1", "--html", statusPath])
            #expect(status.status == 0, "\(status.stderr)")
            let fromStatus = try await Chromium.load("file://\(statusPath)")
            Self.expectRenderedWithoutErrors(fromStatus)
            #expect(Self.occurrences(of: "<tr class=\"change\"", in: fromStatus.dom) == changes.count)
            let statusTotals = Self.totals(in: fromStatus.dom)
            for key in [
                "notifications.seen", "notifications.applied", "changes", "rejections", "api.requests", "api.rateLimited", "customersChecked",
            ] {
                #expect(statusTotals[key] == totals[key], "\(key)")
            }
            #expect(Self.attribute("data-signed-count", in: fromStatus.dom).compactMap(Int.init).reduce(0, +) == recorded)
            let withoutRun = try await rehearsal.reconciler(["status", "--html", rehearsal.file("x.html")])
            #expect(withoutRun.status == 1)
            #expect(withoutRun.stderr.contains("--html needs --run"), "\(withoutRun.stderr)")
        }
    }

    /// A partial run (Apple closes the API) exits 2 and still writes its page, with how it ended,
    /// the failed shards and the 429 that closed the endpoint. (An interrupted run's page is
    /// ReconcileRunTests.sigtermStopsARunCleanlyAndTheRerunResumesIt's, `run`'s one real signal.)
    @Test func aPartialRunStillWritesItsPage() async throws {
        try await Rehearsal.with(customers: 30, seed: 85) { rehearsal in
            try await rehearsal.setFaults(["rateLimitedRate": 1, "rateLimitedRetryAfterSeconds": 3600])
            let partialPath = rehearsal.file("partial.html")
            let run = try await rehearsal.runWindow(["--report-html", partialPath, "--max-retry-after", "60", "--concurrency", "1"])
            #expect(run.status == 2, "\(run.stdout)\n\(run.stderr)")
            Self.expectSelfContained(try String(contentsOfFile: partialPath, encoding: .utf8))
            let page = try await Chromium.load("file://\(partialPath)")
            Self.expectRenderedWithoutErrors(page)
            #expect(Self.attribute("data-status", in: page.dom).first == "partial")
            #expect(Self.occurrences(of: "<tr class=\"failed-shard\"", in: page.dom) > 0)
            #expect(Self.attribute("data-rate-limited", in: page.dom).compactMap(Int.init).reduce(0, +) >= 1)
            #expect(Self.occurrences(of: "class=\"m429\"", in: page.dom) >= 1)
            #expect(page.dom.contains("rerun the same command"))
        }
    }

    /// Every value from data is escaped, whatever it holds; the page still runs without errors.
    @Test func everyValueFromDataIsEscaped() async throws {
        try await TemporaryDirectory.with { directory in
            let hostile = "\"><script>document.title='pwned'</script><img src=x onerror=alert(1)>&amp;"
            var report = Self.report()
            report.bundleId = hostile
            report.failure = hostile
            report.notificationsByType = [hostile: .init(seen: 1, applied: 1), "DID_RENEW": .init(seen: 2, applied: 2)]
            report.changes = [
                .init(
                    originalTransactionId: hostile, fields: ["productId"], before: .init(originalTransactionId: hostile, productId: hostile),
                    after: .init(originalTransactionId: hostile, productId: "</td></tr></table>" + hostile))
            ]
            report.changesTotal = 1
            report.rejections = [
                Rejection(
                    source: .notificationHistory, notificationUUID: hostile, typeAndSubtype: hostile, reason: .invalidSignature,
                    detail: hostile, payloadSHA256: hostile, newlyQuarantined: true)
            ]
            report.customersFailed = [.init(anchorTransactionId: hostile, kind: .retryable, error: hostile)]
            report.shardsFailed = [
                .init(
                    query: hostile, shardStart: .init(millisecondsSince1970: 0), shardEnd: .init(millisecondsSince1970: 1), kind: .permanent,
                    error: hostile)
            ]
            let axis = RunTimeline.Axis(
                start: report.windowStart.millisecondsSince1970, end: report.windowEnd.millisecondsSince1970, bucketMilliseconds: 60_000)
            let timeline = RunTimeline(
                signedAxis: axis, bySignedDate: [.init(typeAndSubtype: hostile, bucket: 3, applied: 1, stale: 0, recorded: 0)],
                runAxis: axis, byAppliedTime: [.init(typeAndSubtype: hostile, bucket: 1, applied: 1, stale: 0, recorded: 0)],
                apiAxis: axis, api: [.init(endpoint: hostile, bucket: 2, requests: 5, busiestSecond: 5, rateLimited: 1, retries: 1)],
                apiBudgets: [hostile: 4], apiProcesses: 1)
            let html = IncidentReportPage(report: report, timeline: timeline).render()
            #expect(!html.contains("<img"))
            #expect(!html.contains("document.title='pwned'</script>"))
            #expect(html.components(separatedBy: "<script>").count - 1 == 2, "only the page's own two scripts")
            #expect(html.contains("&quot;&gt;&lt;script&gt;"))
            #expect(html.contains("&amp;amp;"))

            let path = directory.file("hostile.html")
            try Data(html.utf8).write(to: URL(fileURLWithPath: path))
            let page = try await Chromium.load("file://\(path)")
            Self.expectRenderedWithoutErrors(page)
            #expect(!page.dom.contains("<img"))
            #expect(!page.dom.contains("<title>pwned"))
            #expect(Self.occurrences(of: "<tr class=\"change\"", in: page.dom) == 1)
            #expect(Self.occurrences(of: "<tr class=\"rejection\"", in: page.dom) == 1)
        }
    }

    /// The check really fails on a page with a JavaScript error (the page's own first script records it).
    @Test func aPageWithAScriptErrorIsCaught() async throws {
        try await TemporaryDirectory.with { directory in
            let html = IncidentReportPage(report: Self.report(), timeline: nil).render()
                .replacingOccurrences(
                    of: "document.body.setAttribute('data-ready', '1');", with: "undefinedFunction(); document.body.setAttribute('data-ready', '1');")
            let path = directory.file("broken.html")
            try Data(html.utf8).write(to: URL(fileURLWithPath: path))
            let page = try await Chromium.load("file://\(path)")
            #expect(Self.attribute("data-errors", in: page.dom).first?.contains("undefinedFunction") == true)
            #expect(!page.dom.contains("data-ready=\"1\""))
            #expect(page.console.contains { $0.contains("undefinedFunction") })
        }
    }

    // MARK: Helpers

    /// Nothing the page refers to is outside it: no URL, no file, no stylesheet or font to fetch.
    static func expectSelfContained(_ html: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for external in ["http://", "https://", "src=", "<link", "@import", "url(", "//cdn", "@font-face"] {
            #expect(!html.lowercased().contains(external), "the page refers to something external: \(external)", sourceLocation: sourceLocation)
        }
    }

    static func expectRenderedWithoutErrors(_ page: Chromium.LoadedPage, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(page.dom.contains("data-ready=\"1\""), "the page's script did not run to its end", sourceLocation: sourceLocation)
        #expect(attribute("data-errors", in: page.dom).isEmpty, "\(attribute("data-errors", in: page.dom))", sourceLocation: sourceLocation)
        #expect(page.console.isEmpty, "the page logged: \(page.console)", sourceLocation: sourceLocation)
    }

    static func occurrences(of text: String, in dom: String) -> Int { dom.components(separatedBy: text).count - 1 }

    /// Every value of `name="..."` in the DOM, in order.
    static func attribute(_ name: String, in dom: String) -> [String] {
        dom.components(separatedBy: " \(name)=\"").dropFirst().map { String($0.prefix { $0 != "\"" }) }
    }

    /// The text of each element that starts with `opening` (up to the next tag).
    static func texts(after opening: String, in dom: String) -> [String] {
        dom.components(separatedBy: opening).dropFirst().map { rest in
            let content = rest.drop { $0 != ">" }.dropFirst()
            return String(content.prefix { $0 != "<" })
        }
    }

    /// `data-total` keys and the text of their elements.
    static func totals(in dom: String) -> [String: String] {
        var totals: [String: String] = [:]
        for piece in dom.components(separatedBy: "data-total=\"").dropFirst() {
            let key = String(piece.prefix { $0 != "\"" })
            totals[key] = String(piece.drop { $0 != ">" }.dropFirst().prefix { $0 != "<" })
        }
        return totals
    }

    /// A small report of a finished run, for pages without a database.
    static func report() -> RunReport {
        let end = Int64(Date().timeIntervalSince1970 * 1000)
        return RunReport(
            runId: 7, kind: .manual, environment: .production, bundleId: "com.example.app",
            windowStart: .init(millisecondsSince1970: end - 3_600_000), windowEnd: .init(millisecondsSince1970: end),
            dryRun: false, status: .succeeded, failure: nil, startedAt: Date(), finishedAt: Date(), durationSeconds: 1.5, replaySeconds: nil,
            urgentRecoverySeconds: nil,
            notifications: .init(seen: 3, applied: 3), notificationsByType: [:], shardsTotal: 2, shardsFailed: [], pages: 2,
            paginationRestarts: 0, customersChecked: 1, customersFailed: [], transactionsFetched: 4, revisionResets: [], changes: [],
            changesTotal: 0, rejections: [], api: .zero)
    }

}
