import ArgumentParser

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "(not yet available)")

    func run() async throws {
        throw CommandError.configuration("run is not available yet")
    }
}
