import Foundation
import TestSupport
import Testing

/// The documentation's links: the README sends a reader to docs/, and docs/ to each other, the
/// deploy notes and back, by relative links with `#anchors`. A section that moves or is renamed
/// breaks them without a word, so every relative link of these documents must name a file that
/// exists and, for a Markdown file, an anchor that is one of its headings.
@Suite struct DocumentationLinksTests {
    /// The documents a reader follows links through.
    static func documents() throws -> [URL] {
        let docs = Repository.root.appendingPathComponent("docs")
        let beside = try FileManager.default.contentsOfDirectory(at: docs, includingPropertiesForKeys: nil).filter { $0.pathExtension == "md" }
        return ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "jobs/RUNBOOK.md", "jobs/deploy/README.md"].map {
            Repository.root.appendingPathComponent($0)
        } + beside.sorted { $0.path < $1.path }
    }

    @Test func everyRelativeLinkNamesAFileAndAHeadingThatExist() throws {
        let documents = try Self.documents()
        #expect(documents.count > 5, "\(documents)")
        var broken: [String] = []
        var followed = 0
        for document in documents {
            let text = try String(contentsOf: document, encoding: .utf8)
            for link in Markdown.links(in: text) where !link.target.contains(":") {
                followed += 1
                let parts = link.target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let (path, anchor) = (parts[0], parts.count > 1 ? parts[1] : nil)
                let target = path.isEmpty ? document : document.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
                let name = "\(document.path.replacingOccurrences(of: Repository.root.path + "/", with: "")):\(link.line): \(link.target)"
                guard FileManager.default.fileExists(atPath: target.path) else {
                    broken.append("\(name) (no such file)")
                    continue
                }
                if let anchor, target.pathExtension == "md" {
                    let headings = Markdown.anchors(in: try String(contentsOf: target, encoding: .utf8))
                    if !headings.contains(anchor) { broken.append("\(name) (no such heading)") }
                }
            }
        }
        #expect(followed > 50, "found only \(followed) relative links")
        #expect(broken.isEmpty, "broken links:\n\(broken.joined(separator: "\n"))")
    }

    /// The anchors GitHub gives headings, and the links the checker finds, on a small document.
    @Test func anchorsAndLinksAreReadAsGitHubRendersThem() {
        let text = """
            # Title
            ## On call at 3 a.m.
            ### `entitled`: who has access
            ## Forwarding to the app's own webhook
            ## Forwarding to the app's own webhook
            See [the feed](docs/feed.md#the-change-feed) and [a
            split link](#on-call-at-3-am), not `[code](nowhere.md)`.
            ```sh
            echo "[not a link](nowhere.md)"
            ## not a heading
            ```
            """
        #expect(
            Markdown.anchors(in: text)
                == [
                    "title", "on-call-at-3-am", "entitled-who-has-access", "forwarding-to-the-apps-own-webhook",
                    "forwarding-to-the-apps-own-webhook-1",
                ])
        #expect(Markdown.links(in: text).map(\.target) == ["docs/feed.md#the-change-feed", "#on-call-at-3-am"])
    }
}

/// Just enough Markdown to follow links: headings and `](target)` outside code.
enum Markdown {
    struct Link: Equatable {
        var line: Int
        var target: String
    }

    /// Each heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens,
    /// a repeated one numbered.
    static func anchors(in text: String) -> [String] {
        var seen: [String: Int] = [:]
        return lines(of: text).compactMap { _, line in
            guard let hashes = line.firstIndex(where: { $0 != "#" }), hashes > line.startIndex, line[hashes] == " ",
                line.distance(from: line.startIndex, to: hashes) <= 6
            else { return nil }
            let title = line[hashes...].trimmingCharacters(in: .whitespaces).lowercased()
            let slug = String(
                title.unicodeScalars.compactMap { scalar -> Character? in
                    if scalar == " " { return "-" }
                    return CharacterSet.alphanumerics.contains(scalar) || scalar == "-" || scalar == "_" ? Character(scalar) : nil
                })
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            return count == 0 ? slug : "\(slug)-\(count)"
        }
    }

    /// The targets of `[text](target)` and `![alt](target)`, outside code blocks and inline code.
    static func links(in text: String) -> [Link] {
        lines(of: text).flatMap { number, line in
            let prose = line.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
                .joined(separator: " ")
            return prose.components(separatedBy: "](").dropFirst().compactMap { rest -> Link? in
                guard let end = rest.firstIndex(where: { $0 == ")" || $0 == " " }), rest[end] == ")", end > rest.startIndex else { return nil }
                return Link(line: number, target: String(rest[..<end]))
            }
        }
    }

    /// The lines outside fenced code blocks, with their numbers.
    private static func lines(of text: String) -> [(Int, String)] {
        var inside = false
        return text.components(separatedBy: "\n").enumerated().compactMap { index, line in
            if line.hasPrefix("```") {
                inside.toggle()
                return nil
            }
            return inside ? nil : (index + 1, line)
        }
    }
}
