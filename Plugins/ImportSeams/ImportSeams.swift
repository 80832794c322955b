import Foundation
import PackagePlugin

/// Fails the build of a target that imports a module its manifest entry does not declare, or that
/// imports PostgreSQL's client outside the store.
///
/// SwiftPM lets a target import any module built before it (a dependency's dependency too), so the
/// manifest alone does not keep the seams between modules; with `InternalImportsByDefault` the
/// compiler stops a declared module's types from leaking through another module's API, and this
/// plugin, applied to every target, stops the undeclared imports while the package is built.
@main
struct ImportSeams: BuildToolPlugin {
    /// Modules of the toolchain and the platform, which no manifest declares.
    static let system: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin",
        "CoreFoundation", "Testing", "XCTest", "_Concurrency", "os",
    ]
    /// Only the store speaks to PostgreSQL (tests and their support may, to arrange what they check).
    static let postgresModules: Set<String> = ["ReconcilerStore"]

    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let module = target as? SwiftSourceModuleTarget else { return [] }
        var declared: Set<String> = [module.name]
        for dependency in module.dependencies {
            switch dependency {
            case .target(let target): declared.insert(target.name)
            case .product(let product):
                declared.insert(product.name)
                declared.formUnion(product.targets.map(\.name))
            @unknown default: break
            }
        }
        let underTests = module.directoryURL.pathComponents.contains("Tests")
        var violations: [String] = []
        for file in module.sourceFiles(withSuffix: "swift") {
            let text = try String(contentsOf: file.url, encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                guard let imported = Self.importedModule(in: line), !Self.system.contains(imported) else { continue }
                let place = "\(file.url.path):\(index + 1)"
                if !declared.contains(imported) {
                    violations.append("\(place): \(module.name) imports \(imported), which Package.swift does not declare for it")
                }
                if imported == "PostgresNIO", !underTests, !Self.postgresModules.contains(module.name) {
                    violations.append("\(place): \(module.name) imports PostgresNIO; only the store (ReconcilerStore) talks to PostgreSQL")
                }
            }
        }
        for violation in violations { Diagnostics.error(violation) }
        if !violations.isEmpty { throw SeamViolation(target: module.name, count: violations.count) }
        return []
    }

    /// The module an `import` declaration names (with any access level, attribute or kind), or `nil`.
    static func importedModule(in line: Substring) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
        while let first = words.first, first.hasPrefix("@") || ["public", "package", "internal", "private", "fileprivate"].contains(first) {
            words = words.dropFirst()
        }
        guard words.first == "import", words.count >= 2 else { return nil }
        words = words.dropFirst()
        if ["struct", "class", "enum", "func", "protocol", "var", "let", "typealias"].contains(words.first!), words.count >= 2 {
            words = words.dropFirst()
        }
        let name = words.first!.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        return name.isEmpty ? nil : String(name)
    }
}

struct SeamViolation: Error, CustomStringConvertible {
    var target: String
    var count: Int
    var description: String { "\(target): \(count) import(s) cross the module seams (see the errors above)" }
}
