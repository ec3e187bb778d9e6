import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// The ALSA virtual sound card (Devices/alsa-virtual, built by `make alsa-virtual`): real ALSA
/// programs — `tutti play` and `tutti speaker` through their ALSA output — play to it, and what
/// it emitted, and when, is checked sample by sample.
@Suite(.serialized) struct ALSAVirtualCardTests {
    static var library: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/alsa/libasound_module_pcm_tutti_virtual.so").path
    }

    /// A configuration naming the card `room` (capturing to `path`), and the environment that
    /// makes ALSA programs read it.
    static func card(in directory: TemporaryDirectory, path: String, ppm: Double, period: Int = 480, buffer: Int = 1920) throws -> String {
        guard FileManager.default.fileExists(atPath: library) else {
            throw TestFailure("\(library) is missing: build it with `make alsa-virtual` (make test does)")
        }
        let config = directory.file("asoundrc")
        try """
            pcm_type.tutti_virtual { lib "\(library)" }
            pcm.room { type tutti_virtual  path "\(path)"  ppm \(ppm)  period \(period)  buffer \(buffer) }
            """.write(toFile: config, atomically: true, encoding: .utf8)
        return "ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:" + config
    }

    @Test(.timeLimit(.minutes(1)))
    func aFilePlaysBitExactOnTheCardsSchedule() throws {
        let directory = try TemporaryDirectory("alsa-virtual")
        defer { directory.remove() }
        let music = directory.file("noise.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=pink:a=0.3:seed=3", "-af", "pan=stereo|c0=c0|c1=0.7*c0", "-ar", "48000", "-c:a", "pcm_f32le", music])
        let environment = try Self.card(in: directory, path: directory.file("room.wav"), ppm: 150)
        let started = MonotonicClock().now()
        let play = try ChildProcess(name: "play", executable: "/usr/bin/env",
                                    arguments: [environment, ChildProcess.tuttiExecutable, "play", "--output", "alsa:room", music],
                                    standardError: directory.file("play.log"))
        #expect(play.waitForExit(timeout: 30) == 0, "\((try? String(contentsOfFile: directory.file("play.log"), encoding: .utf8)) ?? "")")
        let capture = try VirtualCapture(path: directory.file("room.wav"))
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let first = try #require(capture.firstSoundFrame())
        let referenceFirst = try #require((0..<reference.count).first { abs(reference[$0]) > 1e-4 }) / 2
        let frames = min(capture.frameCount - first, reference.count / 2 - referenceFirst)
        let mismatched = (0..<frames * 2).filter { capture.samples[first * 2 + $0] != reference[referenceFirst * 2 + $0] }.count
        print("ALSA virtual card: \(frames) frames played, \(mismatched) samples differ from the file; \(capture.underruns.count) underruns")
        #expect(frames > 95_000 && mismatched == 0 && capture.underruns.isEmpty)
        // Each period leaves 480 / (48000 × (1 + 150 ppm)) s after the one before: 9 998 500.2 ns.
        let spacing = zip(capture.periodTimes.dropFirst(), capture.periodTimes).map { Double($0 - $1) }
        let expected = 480 / (48000 * (1 + 150e-6)) * 1e9
        #expect(spacing.allSatisfy { abs($0 - expected) <= 1 }, "\(spacing.prefix(5))")
        // It started when the program started it, on the machine's monotonic clock.
        let startedAfterMs = (Double(capture.periodTimes[0]) - Double(started)) / 1e6
        #expect(startedAfterMs > 0 && startedAfterMs < 5000)
    }

    /// A room playing through Tutti's own ALSA output to the card, beside a room on `virtual:`:
    /// the two cards emit the house's timeline together.
    @Test(.timeLimit(.minutes(2)))
    func anALSARoomPlaysInSyncWithAVirtualRoom() async throws {
        let directory = try TemporaryDirectory("alsa-room")
        defer { directory.preserveLogs(as: "alsa-room"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=10:c=pink:a=0.3:seed=7", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", music])
        let environment = try Self.card(in: directory, path: directory.file("b.wav"), ppm: -80)
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off"],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let a = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--output", "virtual:" + directory.file("a.wav"),
                                                        "--device-drift-ppm", "40"], standardError: directory.file("a.log"))
        defer { a.interrupt() }
        let b = try ChildProcess(name: "b", executable: "/usr/bin/env",
                                 arguments: [environment, ChildProcess.tuttiExecutable, "speaker", "--server", "127.0.0.1:\(port)", "--name", "b",
                                             "--output", "alsa:room"], standardError: directory.file("b.log"))
        defer { b.interrupt() }
        // Both connected with settled clocks.
        let deadline = Date().addingTimeInterval(30)
        while true {
            guard case .rooms(let report) = try await ControlClient.send(.rooms, host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton) else { continue }
            if report.rooms.count == 2 && report.rooms.allSatisfy({ ($0.clockErrorMicroseconds ?? 1000) < 100 }) { break }
            guard Date() < deadline else { throw TestFailure("rooms not settled: \(report.rooms.map { "\($0.name) \($0.state)" })") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        _ = try await ControlClient.send(.play(files: [music], rooms: nil), host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
        while true {
            guard case .status(let status) = try await ControlClient.send(.status, host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton) else { continue }
            if (status.positionSeconds ?? 0) > 8 { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(a.interrupt() == 0 && b.interrupt() == 0)

        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: try VirtualCapture(path: directory.file("a.wav")), latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "b", capture: try VirtualCapture(path: directory.file("b.wav")), latencyNanoseconds: 0)],
                                            reference: reference, interval: 4800)
        print("ALSA room: skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs, max \(analysis.maximum / 1000) µs over \(analysis.skews.count) checkpoints; underruns \(analysis.underruns), jumps \(analysis.jumps.count)")
        #expect(analysis.skews.count > 50)
        #expect(analysis.percentile(99) / 1000 < 200)
        #expect(analysis.underruns["b"] == 0 && analysis.discontinuities["b"] == 0)
        // Wherever room a was heard, b was too (but for the last checkpoint, as each stopped).
        let aOnly = analysis.series.filter { $0.heard["a"] != nil && $0.heard["b"] == nil }.count
        #expect(aOnly <= 1, "\(aOnly) checkpoints heard in a and not in b")
    }
}
