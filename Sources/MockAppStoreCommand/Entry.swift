import ArgumentParser
import ReconcilerShared

/// `mock-appstore`: a local App Store (`simulate`, the default) and an imitation of the app's own
/// notification handler (`receiver`), for tests, benchmarks and the demo.
@main
struct MockAppStoreEntry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-appstore",
        abstract: "A local App Store imitation, and an imitation of the app's own webhook handler.",
        discussion: """
            Without a subcommand, `simulate` runs: `mock-appstore --customers 200 ...` is `mock-appstore simulate --customers 200 ...`.
            """,
        version: ReconcilerVersion.current,
        subcommands: [MockAppStoreCommand.self, ReceiverCommand.self],
        defaultSubcommand: MockAppStoreCommand.self)
}
