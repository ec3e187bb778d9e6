import ArgumentParser
import Foundation
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiEngine
import TuttiPlayer

#if canImport(Glibc)
import Glibc
#endif
import TuttiMediaHTTP
import TuttiProtocol
import TuttiSpeaker
import TuttiHouse
import TuttiSimulation

/// `tutti-bench startup`: time from `QueuePlayer.play` to the emission of the first sample, for
/// a local file and for the same file over HTTP on loopback, against the ffmpeg CLI's time to
/// its first decoded byte on the same inputs.
///
/// Tutti's figure is exact, not observed: the `playing` event carries the host time at which
/// the device emits frame 0 (on `null`, the simulated card's DAC time), minus the host time at
/// which `play` was called. The player starts the device once the preroll is decoded (local) or
/// once playback is likely to keep up (HTTP, with automatic waiting), so this is the latency a
/// user hears, short of a real card's own output buffer.
/// The anchor, `ffmpeg -nostdin -i INPUT -f f32le -`, is a whole process: its time to the first
/// byte on stdout includes process start-up, which an in-process player does not pay.
struct StartupBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "startup",
        abstract: "Time from play to first sample, local file and HTTP on loopback.",
        discussion: """
            Generates a 30 s MP3 and FLAC (44.1 kHz stereo, resampled to 48 kHz on play), serves \
            them from an HTTP server inside this process on 127.0.0.1, and plays each --runs times \
            on the null device. Reports median, 90th percentile and worst. Goals: ≤ 20 ms local, \
            ≤ 50 ms over loopback HTTP.
            """)

    @Option(help: "Plays per input; the median, p90 and worst are reported.")
    var runs = 20

    @Option(name: .customLong("media-dir"), help: "Directory for the generated media (default: $XDG_CACHE_HOME/tutti-bench/startup or ~/.cache/tutti-bench/startup).")
    var mediaDirectory: String?

    @Flag(help: "Print the results as JSON.")
    var json = false

    mutating func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
    }

    struct Row: Encodable {
        var input: String
        var source: String
        var tuttiMedianMs: Double
        var tuttiP90Ms: Double
        var tuttiWorstMs: Double
        var ffmpegMedianMs: Double
        var ratio: Double
        var goalMs: Double
    }

    func run() throws {
        let directory = try MediaCache.directory(mediaDirectory, subdirectory: "startup")
        var files: [String: [UInt8]] = [:]
        for (name, codec) in [("tune.mp3", ["-c:a", "libmp3lame", "-b:a", "192k"]), ("tune.flac", ["-c:a", "flac"])] {
            let path = directory + "/" + name
            _ = try MediaCache.make(path, regenerate: false) { output in
                _ = try BenchProcess.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=30",
                                      "-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=44100:duration=30:amplitude=0.1",
                                      "-filter_complex", "amix=inputs=2,aformat=channel_layouts=stereo", "-ar", "44100"] + codec + [output])
            }
            files["/" + name] = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        let server = try MediaHTTPServer.startBlocking(files: files)
        defer { try? server.shutdownBlocking() }
        let client = MediaHTTPClient.make()
        defer { try? client.syncShutdown() }
        let network = HTTPInputOpener(client: client, clock: MonotonicClock())

        var rows: [Row] = []
        for name in ["tune.mp3", "tune.flac"] {
            for (label, input, goal) in [("local", directory + "/" + name, 20.0), ("http", server.url(for: "/" + name), 50.0)] {
                Console.progress("startup: \(name) \(label), \(runs) runs")
                // One unmeasured play warms the libraries and the HTTP connection pool, as in a
                // running player.
                _ = try Self.startup(of: input, network: network)
                var tutti: [Double] = []
                var anchor: [Double] = []
                for _ in 0..<runs {
                    tutti.append(try Self.startup(of: input, network: network))
                    anchor.append(try Self.ffmpegFirstByte(input))
                }
                tutti.sort()
                anchor.sort()
                let median = Self.percentile(tutti, 0.5)
                let anchorMedian = Self.percentile(anchor, 0.5)
                rows.append(Row(input: name, source: label, tuttiMedianMs: median, tuttiP90Ms: Self.percentile(tutti, 0.9),
                                tuttiWorstMs: tutti.last!, ffmpegMedianMs: anchorMedian, ratio: anchorMedian / median, goalMs: goal))
            }
        }
        if json {
            Console.output(try Format.json(rows) + "\n")
            return
        }
        Console.output(Format.table(
            header: ["input", "source", "tutti p50 ms", "p90 ms", "worst ms", "ffmpeg 1st byte ms", "ratio", "goal ms"],
            rows: rows.map { [$0.input, $0.source, Format.fixed($0.tuttiMedianMs, 1), Format.fixed($0.tuttiP90Ms, 1), Format.fixed($0.tuttiWorstMs, 1),
                              Format.fixed($0.ffmpegMedianMs, 1), Format.fixed($0.ratio, 2), Format.fixed($0.goalMs, 0)] }))
        Console.output("ratio = ffmpeg first byte / tutti first sample (higher is faster); ffmpeg's includes its process start-up\n")
    }

    /// Milliseconds from `play` to the host time at which frame 0 is emitted.
    static func startup(of input: String, network: HTTPInputOpener) throws -> Double {
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        var configuration = QueuePlayer.Configuration()
        configuration.network = network
        let player = QueuePlayer(items: [PlayerItem(path: input)], outputFormat: format, configuration: configuration)
        let playingAt = Atomic<Int64>(0)
        let started = DispatchSemaphore(value: 0)
        player.onEvent = { event in
            if case .status(.playing, _, let time) = event, playingAt.load(ordering: .relaxed) == 0 {
                playingAt.store(time, ordering: .relaxed)
                started.signal()
            }
            if case .ended = event { started.signal() }
        }
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: nil, format: format)
        let playCalled = MonotonicClock().now()
        try player.play(on: device)
        if started.wait(timeout: .now() + 10) == .timedOut { throw BenchError("\(input): did not start within 10 s") }
        player.stop()
        _ = try player.waitUntilFinished()
        let time = playingAt.load(ordering: .relaxed)
        guard time > 0 else { throw BenchError("\(input): ended without playing") }
        return Double(time - playCalled) / 1e6
    }

    /// Milliseconds from spawning `ffmpeg -i INPUT -f f32le -` to its first byte on stdout.
    static func ffmpegFirstByte(_ input: String) throws -> Double {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw BenchError("pipe: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let arguments = ["ffmpeg", "-nostdin", "-hide_banner", "-i", input, "-ar", "48000", "-f", "f32le", "-"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let start = MonotonicClock().now()
        let status = SpawnSignalMask.withNoneBlocked { posix_spawnp(&pid, "ffmpeg", &actions, nil, &argv, environ) }
        close(pipe[1])
        defer { close(pipe[0]) }
        guard status == 0 else { throw BenchError("cannot start ffmpeg: \(String(cString: strerror(status)))") }
        var byte: UInt8 = 0
        let got = read(pipe[0], &byte, 1)
        let end = MonotonicClock().now()
        ChildSignal.send(SIGKILL, to: pid)
        var exitStatus: Int32 = 0
        waitpid(pid, &exitStatus, 0)
        guard got == 1 else { throw BenchError("ffmpeg gave no output for \(input)") }
        return Double(end - start) / 1e6
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }
}
