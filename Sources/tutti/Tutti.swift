import TuttiCommandLine
import ArgumentParser

@main
struct Tutti: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tutti",
        abstract: "Multi-room audio for Linux: play anything, in one room or in all of them, in sync.",
        discussion: """
            Examples:
              tutti play song.flac next.mp3              play a queue gaplessly on the default output
              tutti play album/*.m4a --output wav:out.wav render the queue to a WAV file
              tutti info song.flac --json                 format, duration and tags as JSON
              tutti server --listen 0.0.0.0:7700          the house, for multi-room
              tutti speaker --server HOST:7700 --name kitchen
              tutti ctl --server HOST:7700 play a.flac    play in every room, in sync
            """,
        subcommands: [Play.self, Info.self, Server.self, Speaker.self, Ctl.self, Proxy.self])
}
