import ArgumentParser

struct WorkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "work", abstract: "(not yet available)")

    func run() async throws {
        throw CommandError.configuration("work is not available yet")
    }
}
