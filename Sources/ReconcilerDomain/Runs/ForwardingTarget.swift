import Foundation

/// The app's own webhook as the forwarding queue, run records, reports and logs know it: an id
/// (the SHA-256 of the URL, hex) and the URL without its user, password, query or fragment. The
/// full URL, which may carry credentials, is never stored or printed: the process that delivers
/// takes it from its configuration (``ForwardingURL``, `--forward-to`, RECONCILER_FORWARD_TO) and
/// delivers only the queued rows whose target id is its URL's.
///
/// ```swift
/// let url = ForwardingURL("https://hooks:s3cret@app.example.com/apple?token=abc")
/// url.target.redacted   // "https://…@app.example.com/apple?…"
/// url.target.id         // 64 hex digits, the same for the same URL in every process
/// ```
package struct ForwardingTarget: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The SHA-256 of the URL's text, hex.
    package let id: String
    /// The URL without the parts that carry credentials (``redact(_:)``).
    package let redacted: String

    package init(url: String) {
        self.init(id: SHA256Hex.digest(url), redacted: Self.redact(url))
    }

    package init(id: String, redacted: String) {
        self.id = id
        self.redacted = redacted
    }

    package var description: String { redacted }

    /// A target as a run record stores it; a record written before targets had ids held the URL
    /// itself, and is read as that URL's target (migration 0009 converts those).
    package init(from decoder: any Decoder) throws {
        if let url = try? decoder.singleValueContainer().decode(String.self) {
            self.init(url: url)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), redacted: try container.decode(String.self, forKey: .redacted))
    }

    private enum CodingKeys: String, CodingKey { case id, redacted }

    /// The URL as output may show it: the fragment dropped, the query replaced by `?…`, a user
    /// and password by `…@`; scheme, host, port and path kept. Migration 0009 applies the same
    /// rule in SQL to the rows it converts, so both give the same text.
    package static func redact(_ url: String) -> String {
        var text = Substring(url)
        if let fragment = text.firstIndex(of: "#") { text = text[..<fragment] }
        var redacted = String(text)
        if let query = redacted.firstIndex(of: "?") { redacted = String(redacted[..<query]) + "?…" }
        guard let separator = redacted.range(of: "://"), !redacted[..<separator.lowerBound].isEmpty,
            !redacted[..<separator.lowerBound].contains(where: { ":/?#".contains($0) })
        else { return redacted }
        let authorityEnd = redacted[separator.upperBound...].firstIndex(where: { "/?#".contains($0) }) ?? redacted.endIndex
        guard let at = redacted[separator.upperBound..<authorityEnd].lastIndex(of: "@") else { return redacted }
        return String(redacted[..<separator.upperBound]) + "…" + redacted[at...]
    }
}

/// The app's webhook URL as configured (`--forward-to`, RECONCILER_FORWARD_TO). It may carry
/// credentials, so it prints as its redacted form wherever it is interpolated; only the request
/// that delivers reads ``value``.
package struct ForwardingURL: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The URL as given, credentials included: for the delivery's request only.
    package let value: String
    /// What the queue and the output know of it.
    package let target: ForwardingTarget

    package init(_ value: String) {
        self.value = value
        self.target = ForwardingTarget(url: value)
    }

    package var description: String { target.redacted }
    package var debugDescription: String { "ForwardingURL(\(target.redacted))" }
}
