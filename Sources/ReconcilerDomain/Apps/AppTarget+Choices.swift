package import AppStoreServer

extension AppTarget {
    /// The options that choose this app and environment: `--app com.example.one --environment sandbox`.
    package var choosingOptions: String { "--app \(bundleId) --environment \(environment.rawValue.lowercased())" }

    /// Each choice's options, for an error that asks the operator to choose one of `targets`:
    /// `--app com.example.one --environment production or --app com.example.one --environment sandbox`.
    package static func choices(_ targets: [AppTarget]) -> String {
        let options = targets.map(\.choosingOptions)
        guard options.count > 1 else { return options.first ?? "" }
        return options.dropLast().joined(separator: ", ") + " or " + options[options.count - 1]
    }
}
