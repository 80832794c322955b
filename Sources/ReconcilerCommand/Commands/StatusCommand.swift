import ArgumentParser

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "(not yet available)")

    func run() async throws {
        throw CommandError.configuration("status is not available yet")
    }
}
