import Foundation
import PackagePlugin

/// Embeds the numbered SQL files of `migrations/` into the target that applies it (the store), as
/// `Migration.embedded`, while the package builds: the `reconciler` binary carries its schema and
/// needs no files to migrate, and no generated copy of the files is committed beside them.
///
/// The files are the command's inputs, so editing one rebuilds the store; the plugin runs at
/// every build, so adding or removing one does too. `MigrationEmbedder` writes the Swift file.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let directory = context.package.directoryURL.appending(path: "migrations")
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { url in
                let name = url.lastPathComponent
                return name.hasSuffix(".sql") && name.prefix(4).allSatisfy(\.isNumber) && name.dropFirst(4).first == "_"
            }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) migrations into \(target.name)",
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: [output.path] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output])
        ]
    }
}
