/// Where a setting was given, so that a hint names it where the operator will look: a key of the
/// configuration file, or a command-line option or environment variable (or the default).
///
/// ```swift
/// SettingOrigin.list([.file(path: "/etc/reconciler/reconciler.yaml", key: "key.id"), .file(path: "/etc/reconciler/reconciler.yaml", key: "key.issuer")])
/// // "key.id and key.issuer in /etc/reconciler/reconciler.yaml"
/// ```
package enum SettingOrigin: Sendable, Hashable, CustomStringConvertible {
    /// `key` (`key.privateKeyPath`, `apps[0].bundleId`) of the configuration file at `path`.
    case file(path: String, key: String)
    /// A command-line option, an environment variable (`--key-id`, `APP_STORE_KEY_ID`), or a default.
    case named(String)

    package var description: String { Self.list([self]) }

    /// The settings in one phrase, each file's keys together: `key.id, key.issuer and
    /// key.privateKeyPath in /etc/reconciler/reconciler.yaml`, `APP_STORE_KEY_ID and --issuer-id`.
    package static func list(_ origins: [SettingOrigin]) -> String {
        var parts: [String] = []
        var files: [(path: String, keys: [String])] = []
        for origin in origins {
            switch origin {
            case .named(let name) where !parts.contains(name): parts.append(name)
            case .file(let path, let key):
                if let index = files.firstIndex(where: { $0.path == path }) {
                    if !files[index].keys.contains(key) { files[index].keys.append(key) }
                } else {
                    files.append((path, [key]))
                }
            default: break
            }
        }
        return joined(parts + files.map { "\(joined($0.keys)) in \($0.path)" })
    }

    /// `a`, `a and b`, `a, b and c`.
    private static func joined(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " and " + items[items.count - 1]
    }
}
