import ArgumentParser
import Foundation
import TuttiCore
import TuttiDiagnostics
import TuttiEngine
import TuttiSimulation

/// `tutti-bench simulate`: a whole house on simulated time (TuttiSimulation's `SimulatedHouse`),
/// its sync measured on what every simulated card emitted, and its speed.
struct SimulateBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a whole house on simulated time from a seed; print sync, clock truth, speed and digests.",
        discussion: """
            The real house, rooms, clock sync, playout and codec run in this one process on one \
            simulated timeline; only time, the network and the sound cards are simulated. The \
            seed draws every room's clock offset (±1 s), clock and crystal drift (±100 ppm) and \
            link (0.5–3 ms delay, up to 3 ms jitter), and the first room's link goes down for \
            20 s a third of the way in. The same seed prints the same digests.

              .build/release/tutti-bench simulate --rooms 4 --minutes 10 --seed 7

            `speed` is simulated seconds per wall second. The anchor, measured in the same \
            run, is how fast `ffmpeg -threads 1` decodes the same music to nowhere: the \
            simulation decodes that FLAC in the house and again in every room, so the two move \
            together when the machine is faster or slower (on a shared VM, by 10–20 %).
            """)

    @Option(help: "Rooms.") var rooms = 4
    @Option(help: "Simulated minutes of music.") var minutes = 10.0
    @Option(help: "Seed for the rooms, links and jitter.") var seed: UInt64 = 1
    @Option(name: .customLong("outage-seconds"), help: "How long the first room's link goes down (0: never).") var outageSeconds = 20.0
    @Flag(help: "Measure sync on the emitted audio too (keeps every room's audio in memory).") var analyse = false
    @Flag(help: "Print JSON.") var json = false
    @Option(name: .customLong("media-dir"), help: "Where generated music is kept.") var mediaDirectory: String?

    struct Output: Encodable {
        struct Room: Encodable {
            var name: String
            var digest: String
            var starvedBlocks: Int
            var resyncs: Int
            var worstClockErrorMicroseconds: Double
            var reportedBoundCoverage: Double
        }
        var rooms: [Room]
        var seed: UInt64
        var simulatedSeconds: Double
        var wallSeconds: Double
        var speed: Double
        /// The anchor: seconds of the music `ffmpeg -threads 1` decodes per CPU second.
        var anchorFFmpegDecodeSpeed: Double
        var skewP50Microseconds: Double?
        var skewP99Microseconds: Double?
        var discontinuities: Int?
    }

    func run() throws {
        guard rooms >= 1, minutes > 0 else { throw ValidationError("--rooms must be ≥ 1 and --minutes > 0") }
        let directory = try MediaCache.directory(mediaDirectory, subdirectory: "simulate")
        let seconds = Int((minutes * 60).rounded(.up)) + 1
        let music = directory + "/music-\(seconds)s.flac"
        if try MediaCache.make(music, regenerate: false, { path in
            Console.progress("generating \(seconds) s of music with ffmpeg…")
            _ = try BenchProcess.ffmpeg(["-f", "lavfi", "-i", "sine=f=220:d=\(seconds)", "-f", "lavfi", "-i", "anoisesrc=d=\(seconds):c=pink:a=0.2:seed=3",
                                  "-filter_complex", "[0]vibrato=f=5[x];[x][1]amix=inputs=2,pan=stereo|c0=c0|c1=0.8*c0", "-ar", "48000", path])
        }) { Console.progress("music in \(music)") }
        let scenario = SimulatedHouse.Scenario.drawn(seed: seed, roomCount: rooms, music: [music], playNanoseconds: Int64(minutes * 60e9),
                                                      outageNanoseconds: Int64(outageSeconds * 1e9))
        var keeping = scenario
        keeping.keepsAudio = analyse
        Console.progress("anchor: ffmpeg decoding the music…")
        let anchor = try BenchProcess.ffmpeg(["-threads", "1", "-i", music, "-f", "null", "-"])
        let anchorSpeed = Double(seconds) / max(anchor.cpuSeconds, 1e-6)
        Console.progress("simulating \(rooms) rooms for \(minutes) min (seed \(seed))…")
        let result = try SimulatedHouse.run(keeping)
        var output = Output(rooms: result.rooms.map {
            Output.Room(name: $0.name, digest: $0.digest, starvedBlocks: $0.starvedBlocks, resyncs: $0.resyncs,
                        worstClockErrorMicroseconds: $0.worstClockErrorNanoseconds / 1000, reportedBoundCoverage: $0.reportedBoundCoverage)
        }, seed: seed, simulatedSeconds: Double(result.simulatedNanoseconds) / 1e9, wallSeconds: result.wallSeconds, speed: result.speed,
                            anchorFFmpegDecodeSpeed: anchorSpeed)
        if analyse {
            Console.progress("measuring sync on the emitted audio…")
            let reader = GaplessQueueReader(paths: [music], outputRate: 48000, channelCount: 2)
            var reference: [Float] = []
            var block: [Float] = []
            while reader.read(into: &block) > 0 { reference += block }
            let analysis = SyncAnalysis.analyse(rooms: result.rooms.compactMap { room in
                room.capture.map { SyncAnalysis.Room(name: room.name, capture: $0, latencyNanoseconds: 0) }
            }, reference: reference, interval: 48000)
            output.skewP50Microseconds = analysis.percentile(50) / 1000
            output.skewP99Microseconds = analysis.percentile(99) / 1000
            output.discontinuities = analysis.discontinuities.values.reduce(0, +)
        }
        if json {
            Console.output(try Format.json(output))
            return
        }
        let rows = output.rooms.map { room in
            [room.name, String(room.starvedBlocks), String(room.resyncs), Format.fixed(room.worstClockErrorMicroseconds, 1),
             Format.fixed(room.reportedBoundCoverage * 100, 1) + " %", String(room.digest.prefix(16))]
        }
        Console.output(Format.table(header: ["room", "starved", "resyncs", "worst clock µs", "bound covers", "sha-256"], rows: rows))
        if let p50 = output.skewP50Microseconds, let p99 = output.skewP99Microseconds {
            Console.output("inter-room skew on the emitted audio: p50 \(Format.fixed(p50, 1)) µs, p99 \(Format.fixed(p99, 1)) µs; discontinuities \(output.discontinuities ?? 0)\n")
        }
        Console.output("simulated \(Format.fixed(output.simulatedSeconds, 0)) s in \(Format.fixed(output.wallSeconds, 1)) s of wall time: \(Format.fixed(output.speed, 1))× real time (target ≥ 50× for 4 rooms)\n")
        Console.output("anchor, same run: ffmpeg -threads 1 decodes this music at \(Format.fixed(output.anchorFFmpegDecodeSpeed, 0))× real time (one CPU second per \(Format.fixed(output.anchorFFmpegDecodeSpeed, 0)) s of music)\n")
    }
}
