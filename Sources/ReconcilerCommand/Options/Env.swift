import Foundation

/// Environment variables, with empty values treated as unset.
enum Env {
    static func value(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }
}
