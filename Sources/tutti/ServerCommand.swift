import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TuttiCore
import TuttiMedia
import TuttiHouse
import TuttiMediaHTTP
import TuttiEngine
import TuttiPlayer
import TuttiProtocol
import TuttiSpeaker

struct Server: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the house: the queue, the timeline and the rooms.",
        discussion: """
            Speakers connect with `tutti speaker --server HOST:PORT`; control it with `tutti ctl --server HOST:PORT …`.
            It listens on TCP (audio, control) and UDP (clock sync) on the same port. Audio is sent to every room \
            far ahead of the playhead (5 minutes by default) as fast as the network allows, so outages go unheard.
            """)

    @Option(help: "Address to listen on, e.g. 0.0.0.0:7700 or 127.0.0.1:0 (0 picks a free port).")
    var listen: HostPort = HostPort(argument: "0.0.0.0:7700")!

    @Option(name: .customLong("state-dir"), help: "Directory of the house's store (house.sqlite): the queue, volumes, group and the playing stream, so a restarted house resumes where it was.")
    var stateDirectory: String?

    @Option(name: .customLong("buffer-seconds"), help: "How far ahead of the playhead rooms are filled.")
    var bufferSeconds: Double = 300

    @Option(help: "Codec on the wire: flac (lossless, default) or pcm-f32le.")
    var codec: String = "flac"

    func run() async throws {
        // The process's one HTTP client, for URLs in the queue.
        let client = MediaHTTPClient.make()
        var configuration = House.Configuration()
        configuration.network = HTTPInputOpener(client: client, clock: MonotonicClock())
        configuration.stateDirectory = stateDirectory
        configuration.bufferDepthNanoseconds = Int64(bufferSeconds * 1e9)
        guard let codec = StreamCodec(wireName: codec) else { throw ValidationError("--codec \(codec): use flac or pcm-f32le") }
        configuration.codec = codec
        let server = HouseServer(clock: MonotonicClock(), host: listen.host, port: listen.port, configuration: configuration) { line in
            Terminal.standardError("tutti server: \(line)\n")
        }
        let port: Int
        do { port = try await server.start() } catch {
            Terminal.standardError("tutti server: cannot listen on \(listen): \(error)\n")
            throw ExitCode(2)
        }
        Terminal.standardOutput("tutti server: listening on \(HostPort(argument: "\(listen.host):\(port)")!) (TCP and UDP)\n")
        await waitForTermination()
        await server.stop()
        try? await client.shutdown()
    }
}

