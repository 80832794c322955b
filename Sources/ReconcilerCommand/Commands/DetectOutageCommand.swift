import ArgumentParser

struct DetectOutageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "detect-outage", abstract: "(not yet available)")

    func run() async throws {
        throw CommandError.configuration("detect-outage is not available yet")
    }
}
