import Foundation

/// Environment variables, with empty values treated as unset.
enum Env {
    /// A yes/no variable: 1, true or yes.
    static func flag(_ name: String) -> Bool {
        ["1", "true", "yes"].contains(value(name)?.lowercased() ?? "")
    }

    static func value(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }
}
