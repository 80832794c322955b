import AppStoreServer
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared

/// The notifications chart of ``IncidentReportPage``: one row per `TYPE/SUBTYPE` (urgent ones first
/// and highlighted); on the left, bars of the notifications by `signedDate` over the outage window;
/// on the right, by when they were applied on the run's clock. Drawn as inline SVG.
struct NotificationChart {
    let report: RunReport
    let timeline: RunTimeline

    static let width = 1140.0
    static let labelX = 10.0
    static let leftX = 290.0, leftWidth = 520.0
    static let countX = 818.0
    static let rightX = 870.0, rightWidth = 260.0
    static let top = 34.0, rowHeight = 18.0

    func svg() -> String {
        var totals: [String: Int] = [:]
        for bucket in timeline.bySignedDate { totals[bucket.typeAndSubtype, default: 0] += bucket.total }
        let types = totals.keys.sorted { (RunTimeline.isUrgent($0) ? 0 : 1, $0) < (RunTimeline.isUrgent($1) ? 0 : 1, $1) }
        let rowIndex = Dictionary(uniqueKeysWithValues: types.enumerated().map { ($0.element, $0.offset) })
        let bottom = Self.top + Double(types.count) * Self.rowHeight
        let height = bottom + 40
        var svg = SVG()
        svg.raw(
            "<svg id=\"chart-notifications\" class=\"chart\" viewBox=\"0 0 \(Self.width) \(SVG.number(height))\" role=\"img\" aria-label=\"Notifications replayed per type\">\n"
        )
        svg.raw("<text class=\"title\" x=\"\(Self.leftX)\" y=\"12\">by signedDate in the outage window (UTC)</text>\n")
        svg.raw("<text class=\"title\" x=\"\(Self.rightX)\" y=\"12\">when applied, since the run started</text>\n")
        svg.raw("<text x=\"\(Self.countX)\" y=\"12\">count</text>\n")

        // Row backgrounds: urgent rows tinted.
        for (index, type) in types.enumerated() where RunTimeline.isUrgent(type) {
            svg.raw(
                "<rect class=\"row-u\" x=\"0\" y=\"\(SVG.number(Self.top + Double(index) * Self.rowHeight))\" width=\"\(Self.width)\" height=\"\(Self.rowHeight)\"/>\n"
            )
        }
        // The outage window itself, shaded on the left axis.
        let signed = timeline.signedAxis
        let signedSpan = Double(Int64(signed.bucketCount) * signed.bucketMilliseconds)
        let signedX = { (ms: Int64) in Self.leftX + Double(ms - signed.start) / signedSpan * Self.leftWidth }
        let windowStart = signedX(report.windowStart.millisecondsSince1970), windowEnd = signedX(report.windowEnd.millisecondsSince1970)
        svg.raw(
            "<rect class=\"window\" x=\"\(SVG.number(windowStart))\" y=\"\(SVG.number(Self.top - 4))\" width=\"\(SVG.number(max(windowEnd - windowStart, 1)))\" "
        )
        svg.raw("height=\"\(SVG.number(bottom - Self.top + 4))\"><title>")
        svg.text("outage window \(report.windowStart) → \(report.windowEnd)")
        svg.raw("</title></rect>\n")

        for (index, type) in types.enumerated() {
            let y = Self.top + Double(index) * Self.rowHeight
            svg.raw("<text class=\"label\(RunTimeline.isUrgent(type) ? " u" : "")\" x=\"\(Self.labelX)\" y=\"\(SVG.number(y + 13))\">")
            svg.text(type)
            svg.raw("</text><text x=\"\(Self.countX)\" y=\"\(SVG.number(y + 13))\">\(totals[type] ?? 0)</text>\n")
            svg.raw(
                "<line class=\"grid\" x1=\"0\" x2=\"\(Self.width)\" y1=\"\(SVG.number(y + Self.rowHeight))\" y2=\"\(SVG.number(y + Self.rowHeight))\"/>\n"
            )
        }

        let run = timeline.runAxis
        let runStart = Int64((report.startedAt.timeIntervalSince1970 * 1000).rounded(.down))
        bars(&svg, timeline.bySignedDate, axis: signed, x: Self.leftX, width: Self.leftWidth, rows: rowIndex, kind: "signed") { bucket in
            let from = signed.start + Int64(bucket) * signed.bucketMilliseconds
            return
                "\(Self.clock(from, step: signed.bucketMilliseconds))–\(Self.clock(from + signed.bucketMilliseconds, step: signed.bucketMilliseconds)) UTC"
        }
        bars(&svg, timeline.byAppliedTime, axis: run, x: Self.rightX, width: Self.rightWidth, rows: rowIndex, kind: "applied") { bucket in
            let from = run.start + Int64(bucket) * run.bucketMilliseconds
            return "applied \(Self.offset(from - runStart)) to \(Self.offset(from + run.bucketMilliseconds - runStart)) after the start"
        }

        // Axes.
        Self.ticks(&svg, axis: signed, x: Self.leftX, width: Self.leftWidth, y: bottom, maximumTicks: 8) { Self.clock($0, step: $1) }
        Self.ticks(&svg, axis: run, x: Self.rightX, width: Self.rightWidth, y: bottom, maximumTicks: 5, origin: runStart) { value, _ in
            Self.offset(value - runStart)
        }
        svg.raw("<rect class=\"bu\" x=\"\(Self.labelX)\" y=\"\(SVG.number(bottom + 26))\" width=\"10\" height=\"8\"/>")
        svg.raw("<text x=\"\(Self.labelX + 14)\" y=\"\(SVG.number(bottom + 34))\">urgent (asked for first)</text>")
        svg.raw("<rect class=\"bo\" x=\"\(Self.labelX + 150)\" y=\"\(SVG.number(bottom + 26))\" width=\"10\" height=\"8\"/>")
        svg.raw("<text x=\"\(Self.labelX + 164)\" y=\"\(SVG.number(bottom + 34))\">other types</text>\n")
        svg.raw("</svg>\n")
        return svg.output
    }

    private func bars(
        _ svg: inout SVG, _ buckets: [RunTimeline.NotificationBucket], axis: RunTimeline.Axis, x: Double, width: Double,
        rows: [String: Int], kind: String, range: (Int) -> String
    ) {
        let count = max(axis.bucketCount, 1)
        let barWidth = width / Double(count)
        let largest = Double(buckets.map(\.total).max() ?? 1)
        svg.raw("<g class=\"\(kind)\">\n")
        for bucket in buckets where bucket.total > 0 {
            guard let row = rows[bucket.typeAndSubtype] else { continue }
            let rowBottom = Self.top + Double(row + 1) * Self.rowHeight - 2
            let height = max(1.5, (Double(bucket.total) / largest).squareRoot() * (Self.rowHeight - 4))
            let left = x + Double(min(bucket.bucket, count - 1)) * barWidth
            svg.raw("<rect class=\"\(RunTimeline.isUrgent(bucket.typeAndSubtype) ? "bu" : "bo")\" data-\(kind)-count=\"\(bucket.total)\" ")
            svg.raw(
                "x=\"\(SVG.number(left))\" y=\"\(SVG.number(rowBottom - height))\" width=\"\(SVG.number(max(barWidth - 0.6, 0.8)))\" height=\"\(SVG.number(height))\"><title>"
            )
            svg.text(
                "\(bucket.typeAndSubtype), \(range(bucket.bucket)): \(bucket.total) (applied \(bucket.applied), stale \(bucket.stale), recorded \(bucket.recorded))"
            )
            svg.raw("</title></rect>\n")
        }
        svg.raw("</g>\n")
    }

    /// Tick marks and labels under an axis, at round steps (from `origin` when given).
    static func ticks(
        _ svg: inout SVG, axis: RunTimeline.Axis, x: Double, width: Double, y: Double, maximumTicks: Int, origin: Int64? = nil,
        label: (Int64, Int64) -> String
    ) {
        let span = Int64(axis.bucketCount) * axis.bucketMilliseconds
        let wanted = max(span / Int64(maximumTicks), 1)
        let step = RunTimeline.Axis.roundLengths.first { $0 >= wanted } ?? (wanted + 3_600_000 - 1) / 3_600_000 * 3_600_000
        let base = origin ?? 0
        var value = base + Int64((Double(axis.start - base) / Double(step)).rounded(.up)) * step
        svg.raw("<line class=\"grid\" x1=\"\(SVG.number(x))\" x2=\"\(SVG.number(x + width))\" y1=\"\(SVG.number(y))\" y2=\"\(SVG.number(y))\"/>\n")
        while value <= axis.start + span {
            let tickX = x + Double(value - axis.start) / Double(span) * width
            svg.raw(
                "<line class=\"grid\" x1=\"\(SVG.number(tickX))\" x2=\"\(SVG.number(tickX))\" y1=\"\(SVG.number(y))\" y2=\"\(SVG.number(y + 4))\"/>")
            svg.raw("<text x=\"\(SVG.number(tickX))\" y=\"\(SVG.number(y + 15))\" text-anchor=\"middle\">")
            svg.text(label(value, step))
            svg.raw("</text>\n")
            value += step
        }
    }

    /// `06:45`, `06:45:30`, or `11-21 06:45` for steps of a day or more.
    static func clock(_ milliseconds: Int64, step: Int64) -> String {
        let iso = Array(Timestamp(millisecondsSince1970: milliseconds).description)
        let text = { (range: Range<Int>) in String(iso[range]) }
        if step >= 86_400_000 { return text(5..<10) + " " + text(11..<16) }
        return step % 60_000 == 0 ? text(11..<16) : text(11..<19)
    }

    /// `+0 s`, `+1.5 s`, `+2 min`, `+1 h 30 min`.
    static func offset(_ milliseconds: Int64) -> String {
        milliseconds == 0 ? "+0 s" : (milliseconds < 0 ? "−" : "+") + IncidentReportPage.duration(milliseconds: abs(milliseconds))
    }
}

/// One endpoint's chart of ``IncidentReportPage``: the busiest second of each bucket of the run's
/// clock against the budget, with markers for 429 responses and retries.
struct APIChart {
    let report: RunReport
    let timeline: RunTimeline
    let endpoint: String

    static let width = 1140.0
    static let plotX = 50.0, plotWidth = 1010.0
    static let plotTop = 30.0, plotBottom = 130.0
    static let height = 152.0

    func html() -> String {
        let buckets = timeline.api.filter { $0.endpoint == endpoint }
        let requests = buckets.reduce(0) { $0 + $1.requests }
        let rateLimited = buckets.reduce(0) { $0 + $1.rateLimited }
        let retries = buckets.reduce(0) { $0 + $1.retries }
        let busiest = buckets.map(\.busiestSecond).max() ?? 0
        let budget = timeline.apiBudgets[endpoint]
        var html = SVG()
        html.raw("<div class=\"endpoint\" data-endpoint=\"")
        html.text(endpoint)
        html.raw("\">\n<h3>")
        html.text(endpoint)
        html.raw("</h3>\n<p class=\"note\">")
        html.text(
            "\(Plural.count(requests, "request")), busiest second \(busiest)/s, \(rateLimited) × 429, \(Plural.count(retries, "retry", "retries")); "
                + (budget.map { "budget \(Self.rate($0))/s" } ?? "no budget recorded"))
        html.raw("</p>\n")

        let axis = timeline.apiAxis
        let count = max(axis.bucketCount, 1)
        let barWidth = Self.plotWidth / Double(count)
        let top = Self.niceCeiling(max(Double(busiest), budget ?? 0) * 1.15)
        let plotHeight = Self.plotBottom - Self.plotTop
        let y = { (value: Double) in Self.plotBottom - value / top * plotHeight }
        html.raw("<svg class=\"chart chart-api\" viewBox=\"0 0 \(Self.width) \(Self.height)\" role=\"img\" aria-label=\"")
        html.text("\(endpoint): requests per second")
        html.raw("\">\n")
        for value in [0, top / 2, top] {
            html.raw(
                "<line class=\"grid\" x1=\"\(Self.plotX)\" x2=\"\(Self.plotX + Self.plotWidth)\" y1=\"\(SVG.number(y(value)))\" y2=\"\(SVG.number(y(value)))\"/>"
            )
            html.raw("<text x=\"\(Self.plotX - 6)\" y=\"\(SVG.number(y(value) + 4))\" text-anchor=\"end\">\(Self.rate(value))/s</text>\n")
        }
        html.raw("<text x=\"4\" y=\"9\">429</text><text x=\"4\" y=\"22\">retries</text>\n")
        let runStart = Int64((report.startedAt.timeIntervalSince1970 * 1000).rounded(.down))
        for bucket in buckets {
            let left = Self.plotX + Double(min(bucket.bucket, count - 1)) * barWidth
            let center = left + barWidth / 2
            let from = axis.start + Int64(bucket.bucket) * axis.bucketMilliseconds
            let over = budget.map { Double(bucket.busiestSecond) > $0 } ?? false
            html.raw(
                "<g class=\"bucket\" data-requests=\"\(bucket.requests)\" data-rate-limited=\"\(bucket.rateLimited)\" data-retries=\"\(bucket.retries)\"><title>"
            )
            html.text(
                "\(NotificationChart.offset(from - runStart)) to \(NotificationChart.offset(from + axis.bucketMilliseconds - runStart)): "
                    + "\(Plural.count(bucket.requests, "request")), busiest second \(bucket.busiestSecond)/s, \(bucket.rateLimited) × 429, "
                    + Plural.count(bucket.retries, "retry", "retries"))
            html.raw("</title>")
            html.raw(
                "<rect class=\"\(over ? "bu" : "bo")\" x=\"\(SVG.number(left + barWidth * 0.1))\" y=\"\(SVG.number(y(Double(bucket.busiestSecond))))\" "
            )
            html.raw("width=\"\(SVG.number(max(barWidth * 0.8, 0.8)))\" height=\"\(SVG.number(Double(bucket.busiestSecond) / top * plotHeight))\"/>")
            if bucket.rateLimited > 0 {
                html.raw("<path class=\"m429\" d=\"M\(SVG.number(center - 4)) 3 L\(SVG.number(center + 4)) 3 L\(SVG.number(center)) 11 Z\"/>")
            }
            if bucket.retries > 0 {
                html.raw("<circle class=\"mretry\" cx=\"\(SVG.number(center))\" cy=\"19\" r=\"3\"/>")
            }
            html.raw("</g>\n")
        }
        if let budget {
            html.raw(
                "<line class=\"budget\" x1=\"\(Self.plotX)\" x2=\"\(Self.plotX + Self.plotWidth)\" y1=\"\(SVG.number(y(budget)))\" y2=\"\(SVG.number(y(budget)))\"/>"
            )
            html.raw("<text x=\"\(Self.plotX + Self.plotWidth + 6)\" y=\"\(SVG.number(y(budget) + 4))\">budget</text>\n")
        }
        NotificationChart.ticks(&html, axis: axis, x: Self.plotX, width: Self.plotWidth, y: Self.plotBottom, maximumTicks: 10, origin: runStart) {
            value, _ in
            NotificationChart.offset(value - runStart)
        }
        html.raw("</svg>\n</div>\n")
        return html.output
    }

    /// 40, 4, 0.8.
    static func rate(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }

    /// 1, 2, 5, 10, 20, 50 ... at or above `value`.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 1 else { return 1 }
        let magnitude = pow(10, (log10(value)).rounded(.down))
        for factor in [1.0, 2, 5, 10] where factor * magnitude >= value { return factor * magnitude }
        return 10 * magnitude
    }
}

/// Builds SVG markup; `text` escapes, `raw` does not (only for markup written here).
struct SVG {
    var output = ""

    mutating func raw(_ markup: String) { output += markup }
    mutating func text(_ value: String) { output += IncidentReportPage.escape(value) }

    /// A coordinate with at most one decimal.
    static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }
}
