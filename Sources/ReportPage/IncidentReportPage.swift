import AppStoreServer
package import Foundation
package import Reconciler
package import ReconcilerDomain
import ReconcilerShared

/// The incident report page of a run: one self-contained HTML file an on-call engineer attaches
/// to the postmortem (`run --report-html FILE`, `status --run ID --html FILE`).
///
/// ```swift
/// let html = IncidentReportPage(report: report, timeline: try await ledger.timeline(run: record)).render()
/// try Data(html.utf8).write(to: URL(fileURLWithPath: "run-42.html"))
/// ```
///
/// It needs no network: inline CSS, charts drawn here as inline SVG, system fonts, and a few lines
/// of inline JavaScript for the search box (`#q=TEXT` in the address fills it in). Every value that
/// comes from data is HTML-escaped. It shows the totals of ``RunReport/humanSummary(maximumChanges:)``,
/// the notifications the run recorded per type on the outage window's time axis and on the run's
/// clock (urgent types highlighted), requests per second per endpoint against the budget with
/// 429s and retries, the purchases changed (before → after) and the rejections with their reasons.
package struct IncidentReportPage: Sendable {
    package var report: RunReport
    /// `nil` when it could not be read: the page says so and shows everything else.
    package var timeline: RunTimeline?
    package var generatedAt: Date
    /// The most change rows written; the rest are counted (the JSON report holds all of them).
    package var maximumChangeRows: Int

    package init(report: RunReport, timeline: RunTimeline?, generatedAt: Date = Date(), maximumChangeRows: Int = 50_000) {
        self.report = report
        self.timeline = timeline
        self.generatedAt = generatedAt
        self.maximumChangeRows = maximumChangeRows
    }

    package func render() -> String {
        var html = HTML()
        let title = "Reconcile run \(report.runId): \(report.status.rawValue.uppercased())"
        html.raw(
            "<!DOCTYPE html>\n<html lang=\"en\" data-run-id=\"\(report.runId)\" data-status=\"\(Self.escape(report.status.rawValue))\">\n<head>\n")
        html.raw("<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        // First, so that an error anywhere later (a script that does not parse included) is seen.
        html.raw(
            "<script>window.onerror=function(m){var d=document.documentElement;d.setAttribute('data-errors',(d.getAttribute('data-errors')||'')+String(m)+'\\n');};</script>\n"
        )
        html.raw("<title>")
        html.text("\(title) · \(report.bundleId)")
        html.raw("</title>\n<style>\(Self.css)</style>\n</head>\n<body>\n<main>\n")
        header(&html, title: title)
        cards(&html)
        consumptionSection(&html)
        notificationsSection(&html)
        apiSection(&html)
        totalsSection(&html)
        changesSection(&html)
        rejectionsSection(&html)
        html.raw("<footer class=\"note\">Written by <code>reconciler</code> at ")
        html.text(Self.iso(generatedAt))
        html.raw(". Self-contained: no network access, no external files. <code>--report-json</code> holds the same figures as JSON.</footer>\n")
        html.raw("</main>\n<script>\(Self.script)</script>\n</body>\n</html>\n")
        return html.output
    }

    // MARK: Sections

    private func header(_ html: inout HTML, title: String) {
        html.raw("<header>\n<h1>")
        if report.dryRun { html.raw("<span class=\"badge dry\">DRY RUN</span> ") }
        html.text("Reconcile run \(report.runId) ")
        html.raw("<span class=\"status \(Self.statusClass(report.status))\" data-total=\"status\">")
        html.text(report.status.rawValue.uppercased())
        html.raw("</span></h1>\n<p class=\"meta\">")
        html.text("\(report.windowStart) → \(report.windowEnd)")
        html.raw(" <span class=\"sep\">·</span> ")
        html.text("\(Self.duration(milliseconds: report.window.duration.milliseconds)) window, \(report.kind.rawValue) run")
        html.raw(" <span class=\"sep\">·</span> ")
        html.text("\(report.environment), \(report.bundleId)")
        html.raw("</p>\n")
        if let failure = report.failure {
            html.raw("<p class=\"failure\">Failure: ")
            html.text(failure)
            html.raw("</p>\n")
        }
        if report.hasRetryableFailures {
            html.raw("<p class=\"attention\">Not everything was recovered: rerun the same command to retry what failed (it resumes this run).</p>\n")
        }
        if report.needsAttention {
            html.raw(
                "<p class=\"attention\">Needs attention: <code>reconciler rejections</code> lists the quarantine; failures marked permanent were refused by Apple.</p>\n"
            )
        }
        html.raw("</header>\n")
    }

    private func cards(_ html: inout HTML) {
        let newRejections = report.rejections.filter(\.newlyQuarantined).count
        let items: [(String, String, String)] = [
            (
                "\(report.notifications.seen)", "notifications seen",
                "\(report.notifications.applied) \(report.dryRun ? "would be applied" : "applied")"
            ),
            ("\(report.changesTotal)", "purchases changed", report.dryRun ? "would change" : "before → after below"),
            ("\(report.customersChecked)", "customers checked", "\(report.customersFailed.count) failed"),
            ("\(report.rejections.count)", "signed values rejected", "\(newRejections) newly quarantined"),
            ("\(report.api.requests)", "API requests", "\(report.api.rateLimited) × 429, \(Plural.count(report.api.retries, "retry", "retries"))"),
            (
                Self.seconds(report.durationSeconds), "run duration",
                "\(Plural.count(report.pages, "page")), \(Plural.count(report.shardsTotal, "shard"))"
            ),
        ]
        html.raw("<section class=\"cards\">\n")
        for (value, label, detail) in items {
            html.raw("<div class=\"card\"><b>")
            html.text(value)
            html.raw("</b><span>")
            html.text(label)
            html.raw("</span><small>")
            html.text(detail)
            html.raw("</small></div>\n")
        }
        html.raw("</section>\n")
    }

    private func notificationsSection(_ html: inout HTML) {
        html.raw("<section id=\"notifications\">\n<h2>Notifications replayed</h2>\n")
        guard let timeline else {
            html.raw(
                "<p class=\"note\">The timeline could not be read from the database when this page was written; the totals below are complete.</p>\n</section>\n"
            )
            return
        }
        let recorded = timeline.bySignedDate.reduce(0) { $0 + $1.total }
        html.raw("<p class=\"note\">Each notification this run recorded for the first time (applied, stale or recorded only): ")
        html.raw("left, by its <code>signedDate</code> on the outage window (shaded); right, when it was applied, on the run's clock. ")
        html.raw("Urgent types (<b class=\"u\">DID_RENEW</b>, <b class=\"u\">EXPIRED</b> and their subtypes) are asked for first. ")
        html.raw("Bar height grows with the square root of the count; hover a bar for its figures. ")
        html.text(
            "Duplicates (\(report.notifications.duplicate), already stored by the webhook or an earlier run) and rejections count in the totals only."
        )
        html.raw("</p>\n")
        guard recorded > 0 else {
            html.raw("<p class=\"note empty\">")
            html.text(
                report.dryRun
                    ? "A dry run applies into copies it drops at the end, so no notification of it remains to draw; the totals show what it would apply."
                    : "This run recorded no new notification.")
            html.raw("</p>\n</section>\n")
            return
        }
        html.raw(NotificationChart(report: report, timeline: timeline).svg())
        html.raw("</section>\n")
    }

    private func apiSection(_ html: inout HTML) {
        html.raw("<section id=\"api\">\n<h2>App Store Server API: requests per second against the budget</h2>\n")
        guard let timeline else {
            html.raw("<p class=\"note\">The request timeline could not be read from the database when this page was written.</p>\n</section>\n")
            return
        }
        let endpoints = Array(Set(timeline.api.map(\.endpoint))).sorted { Self.endpointOrder($0) < Self.endpointOrder($1) }
        guard !endpoints.isEmpty else {
            html.raw("<p class=\"note empty\">No requests were recorded for this run (a process that is killed records none).</p>\n</section>\n")
            return
        }
        html.raw("<p class=\"note\">Bars: the busiest second of each ")
        html.text(Self.duration(milliseconds: timeline.apiAxis.bucketMilliseconds))
        html.raw(" on the run's clock. Dashed line: the budget the client kept to")
        if timeline.apiProcesses > 1 { html.text(" (per process; \(timeline.apiProcesses) processes worked on this run)") }
        html.raw(". <span class=\"k429\">▼</span> 429 responses, <span class=\"kretry\">●</span> retries.</p>\n")
        for endpoint in endpoints {
            html.raw(APIChart(report: report, timeline: timeline, endpoint: endpoint).html())
        }
        html.raw("</section>\n")
    }

    private func totalsSection(_ html: inout HTML) {
        let verb = report.dryRun ? "would apply" : "applied"
        let counts = report.notifications
        html.raw("<section id=\"totals\">\n<h2>Totals</h2>\n<table class=\"kv\">\n")
        func row(_ label: String, _ body: (inout HTML) -> Void) {
            html.raw("<tr><th>")
            html.text(label)
            html.raw("</th><td>")
            body(&html)
            html.raw("</td></tr>\n")
        }
        func number(_ key: String, _ value: Int, _ html: inout HTML) {
            html.raw("<span class=\"num\" data-total=\"\(key)\">\(value)</span>")
        }
        row("status") { html in
            html.text(report.status.rawValue.uppercased())
            if report.dryRun { html.text(" (dry run: nothing was changed)") }
            if let failure = report.failure {
                html.raw(" <span class=\"failure\">")
                html.text(failure)
                html.raw("</span>")
            }
        }
        row("run") {
            $0.text("\(report.runId) (\(report.kind.rawValue)), started \(Self.iso(report.startedAt)), ended \(Self.iso(report.finishedAt))")
        }
        row("window") {
            $0.text(
                "\(report.windowStart) → \(report.windowEnd)  (\(report.environment), \(report.bundleId))"
            )
        }
        row("duration") { $0.text("\(String(format: "%.1f", report.durationSeconds)) s") }
        /// Numbers each followed by its words, as a line of the text report reads.
        func numbers(_ parts: [(key: String, value: Int, text: String)], _ html: inout HTML) {
            for part in parts {
                number(part.key, part.value, &html)
                html.text(part.text)
            }
        }
        row("notifications") { html in
            numbers(
                [
                    ("notifications.seen", counts.seen, " seen: "), ("notifications.applied", counts.applied, " \(verb), "),
                    ("notifications.duplicate", counts.duplicate, " duplicate, "), ("notifications.stale", counts.stale, " stale, "),
                    ("notifications.recorded", counts.recorded, " recorded only, "), ("notifications.rejected", counts.rejected, " rejected"),
                ], &html)
        }
        row("history") { html in
            numbers(
                [
                    ("pages", report.pages, " pages over "), ("shardsTotal", report.shardsTotal, " shards, "),
                    ("paginationRestarts", report.paginationRestarts, " expired-token restarts, "),
                    ("shardsFailed", report.shardsFailed.count, " shards failed"),
                ], &html)
        }
        row("customers") { html in
            numbers(
                [
                    ("customersChecked", report.customersChecked, " checked by transaction history, "),
                    ("transactionsFetched", report.transactionsFetched, " transactions fetched, "),
                    ("customersFailed", report.customersFailed.count, " failed"),
                ], &html)
        }
        if !report.revisionResets.isEmpty {
            row("revisions") { html in
                html.text("Apple refused the stored revision of ")
                number("revisionResets", report.revisionResets.count, &html)
                html.text(
                    " customers; their history was read from the start: \(report.revisionResets.prefix(20).joined(separator: ", "))"
                        + (report.revisionResets.count > 20 ? ", …" : ""))
            }
        }
        let newRejections = report.rejections.filter(\.newlyQuarantined).count
        row("rejected") { html in
            number("rejections", report.rejections.count, &html)
            html.text(" signed values quarantined, never applied (\(newRejections) new, \(report.rejections.count - newRejections) known)")
        }
        row("changed") { html in
            number("changes", report.changesTotal, &html)
            html.text(" purchases\(report.dryRun ? " would change" : "")")
        }
        row("api") { html in
            numbers(
                [
                    ("api.requests", report.api.requests, " requests, "), ("api.retries", report.api.retries, " retries, "),
                    ("api.rateLimited", report.api.rateLimited, " × 429, "), ("api.serverErrors", report.api.serverErrors, " × 5xx, "),
                    ("api.transportErrors", report.api.transportErrors, " connection errors"),
                ], &html)
        }
        html.raw("</table>\n")

        if !report.notificationsByType.isEmpty {
            html.raw("<h3>Notifications by type</h3>\n<table id=\"types\">\n<thead><tr><th>type</th><th class=\"n\">seen</th><th class=\"n\">")
            html.text(verb)
            html.raw(
                "</th><th class=\"n\">duplicate</th><th class=\"n\">stale</th><th class=\"n\">recorded</th><th class=\"n\">rejected</th></tr></thead>\n<tbody>\n"
            )
            for (type, counts) in report.notificationsByType.sorted(by: { $0.key < $1.key }) {
                html.raw(RunTimeline.isUrgent(type) ? "<tr class=\"type urgent\">" : "<tr class=\"type\">")
                html.raw("<td>")
                html.text(type)
                html.raw("</td>")
                for value in [counts.seen, counts.applied, counts.duplicate, counts.stale, counts.recorded, counts.rejected] {
                    html.raw("<td class=\"n\">\(value)</td>")
                }
                html.raw("</tr>\n")
            }
            html.raw("</tbody>\n</table>\n")
        }
        if !report.shardsFailed.isEmpty {
            html.raw(
                "<h3>Failed shards</h3>\n<table id=\"failed-shards\">\n<thead><tr><th>kind</th><th>query</th><th>shard</th><th>error</th></tr></thead>\n<tbody>\n"
            )
            for shard in report.shardsFailed {
                html.raw("<tr class=\"failed-shard\"><td>")
                html.text(shard.kind.rawValue)
                html.raw("</td><td>")
                html.text(shard.query)
                html.raw("</td><td>")
                html.text("\(shard.shardStart) – \(shard.shardEnd)")
                html.raw("</td><td>")
                html.text(shard.error)
                html.raw("</td></tr>\n")
            }
            html.raw("</tbody>\n</table>\n")
        }
        if !report.customersFailed.isEmpty {
            html.raw(
                "<h3>Failed customers</h3>\n<table id=\"failed-customers\">\n<thead><tr><th>kind</th><th>transaction</th><th>error</th></tr></thead>\n<tbody>\n"
            )
            for customer in report.customersFailed {
                html.raw("<tr class=\"failed-customer\"><td>")
                html.text(customer.kind.rawValue)
                html.raw("</td><td class=\"mono\">")
                html.text(customer.anchorTransactionId)
                html.raw("</td><td>")
                html.text(customer.error)
                html.raw("</td></tr>\n")
            }
            html.raw("</tbody>\n</table>\n")
        }
        html.raw("</section>\n")
    }

    private func changesSection(_ html: inout HTML) {
        let total = report.changesTotal
        let shown = min(report.changes.count, maximumChangeRows)
        html.raw("<section id=\"changes-section\">\n<h2>Purchases changed (\(total))</h2>\n")
        guard total > 0 else {
            html.raw("<p class=\"note empty\">No purchase changed.</p>\n</section>\n")
            return
        }
        html.raw(
            "<p class=\"search\"><input id=\"change-search\" type=\"search\" autocomplete=\"off\" placeholder=\"Search: transaction ID, product, field, date…\"> "
        )
        html.raw("<span class=\"note\"><span id=\"changes-shown\">\(shown)</span> of \(shown) shown")
        if shown < total {
            html.text(
                shown < report.changes.count
                    ? " (the first \(shown) of \(total); more in --report-json)"
                    : " (the first \(shown) of \(total); all: reconciler changes --run-id \(report.runId))")
        }
        html.raw(
            "</span></p>\n<table id=\"changes\">\n<thead><tr><th>original transaction</th><th>product</th><th>before → after</th></tr></thead>\n<tbody>\n"
        )
        for change in report.changes.prefix(shown) {
            html.raw("<tr class=\"change\"><td class=\"mono\">")
            html.text(change.originalTransactionId)
            html.raw("</td><td>")
            html.text(change.after.productId ?? change.before?.productId ?? "")
            html.raw("</td><td>")
            if change.before == nil { html.raw("<span class=\"badge new\">new</span> ") }
            for field in change.fields {
                html.raw(field == "lastSignedDate" && change.fields.count > 1 ? "<span class=\"f minor\">" : "<span class=\"f\">")
                html.raw("<b>")
                html.text(field)
                html.raw("</b> ")
                if change.before != nil {
                    html.text(RunReport.value(field, change.before))
                    html.raw(" <span class=\"arrow\">→</span> ")
                }
                html.text(RunReport.value(field, change.after))
                html.raw("</span> ")
            }
            html.raw("</td></tr>\n")
        }
        html.raw("</tbody>\n</table>\n<p id=\"changes-none\" class=\"note\" hidden>No change matches the search.</p>\n</section>\n")
    }

    /// The consumption requests the run recovered, with their deadlines: first, since they are the
    /// one thing on the page with a clock running (they never change the run's status).
    private func consumptionSection(_ html: inout HTML) {
        guard let requests = report.consumptionRequests, !requests.isEmpty else { return }
        let (open, expired) = (report.consumptionRequestsOpen ?? 0, report.consumptionRequestsExpired ?? 0)
        let total = report.consumptionRequestsTotal ?? requests.count
        html.raw("<section id=\"consumption-section\">\n<h2>Consumption requests (\(total))</h2>\n<p class=\"")
        html.raw(open > 0 ? "attention" : "note")
        html.raw("\" data-total=\"consumption\" data-open=\"\(open)\" data-expired=\"\(expired)\">")
        html.text(
            "\(open) open, \(expired) expired when the report was written. Apple wants an answer within 12 hours of its first send attempt; "
                + "answer with ")
        html.raw("<code>reconciler consumption send</code> (<code>reconciler consumption list --open</code>).</p>\n")
        html.raw(
            "<table id=\"consumption\">\n<thead><tr><th>transaction</th><th>original transaction</th><th>first sent</th><th>respond by</th><th></th></tr></thead>\n<tbody>\n"
        )
        for request in requests {
            html.raw("<tr class=\"consumption-request\"><td class=\"mono\">")
            html.text(request.transactionId ?? "")
            html.raw("</td><td class=\"mono\">")
            html.text(request.originalTransactionId ?? "")
            html.raw("</td><td>")
            html.text(request.firstSentAt.map(\.description) ?? "")
            html.raw("</td><td>")
            html.text(request.respondBy.description)
            html.raw("</td><td>")
            html.raw(
                request.answered
                    ? "<span class=\"badge\">answered</span>"
                    : request.acked
                        ? "<span class=\"badge\">acked</span>"
                        : request.expired ? "<span class=\"badge bad\">expired</span>" : "<span class=\"badge new\">open</span>")
            html.raw("</td></tr>\n")
        }
        html.raw("</tbody>\n</table>\n</section>\n")
    }

    private func rejectionsSection(_ html: inout HTML) {
        html.raw("<section id=\"rejections-section\">\n<h2>Rejections (\(report.rejections.count))</h2>\n")
        guard !report.rejections.isEmpty else {
            html.raw("<p class=\"note empty\">No signed value failed verification.</p>\n</section>\n")
            return
        }
        html.raw("<p class=\"note\">Signed values from Apple's API that failed verification: quarantined, never applied. ")
        html.raw("<code>reconciler rejections --show HASH | reconciler inspect -</code> shows why one fails.</p>\n")
        html.raw(
            "<table id=\"rejections\">\n<thead><tr><th></th><th>reason</th><th>detail</th><th>claims to be</th><th>source</th><th>SHA-256</th></tr></thead>\n<tbody>\n"
        )
        for rejection in report.rejections {
            html.raw("<tr class=\"rejection\"><td>")
            html.raw(rejection.newlyQuarantined ? "<span class=\"badge bad\">new</span>" : "<span class=\"badge\">known</span>")
            html.raw("</td><td><b>")
            html.text(rejection.reason.rawValue)
            html.raw("</b></td><td>")
            html.text(rejection.detail)
            html.raw("</td><td>")
            html.text([rejection.typeAndSubtype, rejection.notificationUUID].compactMap { $0 }.joined(separator: " "))
            html.raw("</td><td>")
            html.text(rejection.source.rawValue)
            html.raw("</td><td class=\"mono\" title=\"")
            html.text(rejection.payloadSHA256)
            html.raw("\">")
            html.text(String(rejection.payloadSHA256.prefix(16)) + "…")
            html.raw("</td></tr>\n")
        }
        html.raw("</tbody>\n</table>\n</section>\n")
    }

    // MARK: Helpers

    /// Text with `&`, `<`, `>`, `"` and `'` escaped: safe in element content and quoted attributes.
    package static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }

    static func statusClass(_ status: RunStatus) -> String {
        switch status {
        case .succeeded: "ok"
        case .succeededWithRejections, .partial, .running: "warn"
        case .failed, .interrupted, .lost: "bad"
        }
    }

    static func endpointOrder(_ name: String) -> (Int, String) {
        (AppStoreServerAPIEndpoint.all.firstIndex { $0.name == name } ?? Int.max, name)
    }

    static func iso(_ date: Date) -> String {
        Timestamp(millisecondsSince1970: Int64((date.timeIntervalSince1970 * 1000).rounded(.down))).description
    }

    static func seconds(_ value: Double) -> String {
        value < 120 ? String(format: "%.1f s", value) : duration(milliseconds: Int64(value * 1000))
    }

    /// 250 ms, 5 s, 15 min, 3 h, 2 d 4 h.
    static func duration(milliseconds: Int64) -> String {
        switch milliseconds {
        case ..<1000: return "\(milliseconds) ms"
        case ..<60_000: return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : String(format: "%.1f s", Double(milliseconds) / 1000)
        case ..<3_600_000:
            return milliseconds % 60_000 == 0 ? "\(milliseconds / 60_000) min" : "\(milliseconds / 60_000) min \(milliseconds % 60_000 / 1000) s"
        case ..<86_400_000:
            return milliseconds % 3_600_000 == 0
                ? "\(milliseconds / 3_600_000) h" : "\(milliseconds / 3_600_000) h \(milliseconds % 3_600_000 / 60_000) min"
        default: return "\(milliseconds / 86_400_000) d \(milliseconds % 86_400_000 / 3_600_000) h"
        }
    }

    static let css = """
        :root{--fg:#1d2430;--muted:#5b6675;--line:#dde2e8;--panel:#f5f7f9;--urgent:#c2410c;--urgent-soft:#fff1ea;--other:#3b6ea8;\
        --ok:#15803d;--warn:#b45309;--bad:#b91c1c}
        *{box-sizing:border-box}
        body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:#fff}
        main{max-width:1180px;margin:0 auto;padding:20px 20px 40px}
        h1{font-size:22px;margin:0 0 4px}
        h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
        h3{font-size:14px;margin:18px 0 6px}
        .meta{color:var(--muted);margin:0}.sep{margin:0 4px}
        .status,.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-size:12px;font-weight:600;vertical-align:middle;color:#fff;background:#6b7280}
        .status.ok{background:var(--ok)}.status.warn{background:var(--warn)}.status.bad{background:var(--bad)}
        .badge.dry{background:#6d28d9}.badge.new{background:var(--other)}.badge.bad{background:var(--bad)}
        .failure{color:var(--bad)}.attention{color:var(--warn);font-weight:600;margin:6px 0 0}
        .cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:10px;margin:16px 0 0}
        .card{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 12px}
        .card b{display:block;font-size:22px;font-variant-numeric:tabular-nums}.card span{display:block;font-weight:600}
        .card small{color:var(--muted)}
        table{border-collapse:collapse;width:100%;font-size:13px}
        th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
        thead th{background:var(--panel)}
        table.kv th{width:120px;color:var(--muted);font-weight:600}
        .n{text-align:right;font-variant-numeric:tabular-nums}
        tr.urgent td:first-child{color:var(--urgent);font-weight:600}
        b.u{color:var(--urgent)}
        code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px}
        .note{color:var(--muted);font-size:12.5px;margin:4px 0 8px}
        .chart{display:block;width:100%;height:auto;margin:4px 0}
        .chart text{font-size:11px;fill:var(--muted)}
        .chart .label{fill:var(--fg);font-size:11.5px}.chart .label.u{fill:var(--urgent);font-weight:600}
        .chart .title{fill:var(--fg);font-weight:600;font-size:12px}
        .chart .grid{stroke:var(--line);stroke-width:1}
        .chart .window{fill:#e9edf2}
        .chart .row-u{fill:var(--urgent-soft)}
        .chart .bu{fill:var(--urgent)}.chart .bo{fill:var(--other)}
        .chart .budget{stroke:var(--bad);stroke-width:1.5;stroke-dasharray:6 4}
        .chart .m429{fill:var(--bad)}.chart .mretry{fill:#d97706}
        .k429{color:var(--bad)}.kretry{color:#d97706}
        .endpoint h3{margin-bottom:0}.endpoint p{margin:0}
        .search input{width:420px;max-width:100%;padding:5px 8px;border:1px solid #b8c0cc;border-radius:4px;font:inherit}
        #changes .f{display:inline-block;margin-right:10px;white-space:nowrap}
        #changes .f.minor{color:var(--muted)}
        .arrow{color:var(--muted)}
        footer{margin-top:32px}
        """

    /// The search box; `#q=TEXT` in the address fills it in. Marks the page ready when it ran.
    static let script = """
        (function () {
          var input = document.getElementById('change-search');
          if (input) {
            var rows = Array.prototype.slice.call(document.querySelectorAll('#changes tbody tr'));
            var texts = rows.map(function (row) { return row.textContent.toLowerCase(); });
            var shown = document.getElementById('changes-shown'), none = document.getElementById('changes-none');
            var filter = function () {
              var query = input.value.trim().toLowerCase(), count = 0;
              for (var i = 0; i < rows.length; i++) {
                var hit = query === '' || texts[i].indexOf(query) >= 0;
                rows[i].hidden = !hit;
                if (hit) count++;
              }
              shown.textContent = String(count);
              none.hidden = count > 0;
            };
            input.addEventListener('input', filter);
            var match = /(?:^#|&)q=([^&]*)/.exec(window.location.hash);
            if (match) {
              var text = match[1].replace(/\\+/g, ' ');
              try { text = decodeURIComponent(text); } catch (malformed) { /* keep it as typed */ }
              input.value = text;
            }
            filter();
          }
          document.body.setAttribute('data-ready', '1');
        })();
        """
}

/// Builds HTML text; `text` escapes, `raw` does not (only for markup written here).
struct HTML {
    var output = ""

    mutating func raw(_ markup: String) { output += markup }
    mutating func text(_ value: String) { output += IncidentReportPage.escape(value) }
}
