import ArgumentParser

struct CheckWebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-webhook", abstract: "(not yet available)")

    func run() async throws {
        throw CommandError.configuration("check-webhook is not available yet")
    }
}
