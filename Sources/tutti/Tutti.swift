import ArgumentParser

@main
struct Tutti: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tutti",
        abstract: "Multi-room audio for Linux: play anything, in one room or in all of them, in sync.",
        discussion: """
            Examples:
              tutti play song.flac next.mp3              play a queue gaplessly on the default output
              tutti play album/*.m4a --output wav:out.wav render the queue to a WAV file
              tutti info song.flac --json                 format, duration and tags as JSON
            """,
        subcommands: [Play.self, Info.self])
}
