import Foundation

/// Writes the Swift file that embeds migration files as `Migration.embedded` (the EmbedMigrations
/// build-tool plugin runs it): `MigrationEmbedder OUTPUT FILE...`, the files in order.
///
/// Each file becomes a raw multi-line string literal whose text is the file's, byte for byte
/// (its delimiter has more `#` than any `"#...` or `\#...` in the text), so the checksums the databases
/// recorded stay those of the files.
@main
struct MigrationEmbedder {
    static func main() throws {
        let arguments = CommandLine.arguments.dropFirst()
        guard let output = arguments.first else {
            FileHandle.standardError.write(Data("usage: MigrationEmbedder OUTPUT FILE...\n".utf8))
            exit(64)
        }
        var text = """
            // Generated at build time by the EmbedMigrations plugin from migrations/*.sql.

            extension Migration {
                /// The migrations in migrations/, embedded so the binary needs no files to migrate.
                package static let embedded: [Migration] = [

            """
        for path in arguments.dropFirst() {
            let url = URL(fileURLWithPath: path)
            let sql = try String(contentsOf: url, encoding: .utf8)
            let delimiter = String(repeating: "#", count: longestHashRun(afterQuoteIn: sql) + 1)
            text += "        Migration(fileName: \(literal(url.lastPathComponent)), sql: \(delimiter)\"\"\"\n"
            text += sql.hasSuffix("\n") ? sql : sql + "\n"
            text += "\"\"\"\(delimiter)),\n"
        }
        text += "    ]\n}\n"
        let data = Data(text.utf8)
        // Unchanged output keeps its date, so the store is not recompiled for nothing.
        if (try? Data(contentsOf: URL(fileURLWithPath: output))) != data {
            try data.write(to: URL(fileURLWithPath: output), options: .atomic)
        }
    }

    /// The longest run of `#` that follows a `"` or a `\` in `text` (what could end the literal
    /// or start an escape in it).
    static func longestHashRun(afterQuoteIn text: String) -> Int {
        var longest = 0
        var run: Int?
        for character in text {
            if character == "\"" || character == "\\" {
                run = 0
            } else if character == "#", let count = run {
                run = count + 1
                longest = max(longest, count + 1)
            } else {
                run = nil
            }
        }
        return longest
    }

    /// A file name as a Swift string literal.
    static func literal(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
