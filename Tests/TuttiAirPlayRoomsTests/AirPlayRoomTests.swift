import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiMedia
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Debian's shairport-sync (AirPlay 1) is a room of the house (`--airplay-room`), beside two
/// Tutti rooms; the three sound cards' output is compared sample by sample. shairport-sync needs
/// Avahi to start, so the suite runs in `scripts/avahi-sandbox.sh` (`make test`'s discovery
/// phase).
@Suite(.serialized) struct AirPlayRoomTests {
    init() throws {
        guard ProcessInfo.processInfo.environment["TUTTI_AVAHI_SANDBOX"] == "1" else {
            throw TestFailure("AirPlayRoomTests need a private avahi-daemon for shairport-sync: run them as `scripts/avahi-sandbox.sh swift test --filter AirPlayRoomTests` (make test does)")
        }
    }

    /// shairport-sync's drift tolerance in these runs: it corrects its card's drift only when its
    /// sync error passes this (its default, 2 ms, lets it wander ±2 ms: measured, docs/AIRPLAY.md).
    static let driftTolerance = 0.0001

    /// The house and its rooms, each on a clock and a sound card of its own:
    /// - Tutti room a on `virtual:`, its clock +35 ppm and its card +40 ppm (the reference);
    /// - Tutti room b on `virtual:`, its clock −25 ppm and its card −60 ppm;
    /// - shairport-sync, room `shair`, on an ALSA virtual card at 44.1 kHz and +30 ppm.
    struct House {
        let server: ChildProcess, a: ChildProcess, b: ChildProcess, receiver: ChildProcess
        let control: HouseControlPort
        let serverLog: String, receiverLog: String

        init(directory: TemporaryDirectory) async throws {
            let alsa = try ALSAVirtualCard.configure([.init(name: "shaircard", path: directory.file("shair.wav"), ppm: 30, period: 441, buffer: 1764)], in: directory)
            let receiverPort = try Self.freePort()
            let configuration = directory.file("shairport-sync.conf")
            try ShairportSync.configuration(name: "Shair", port: receiverPort, card: "shaircard", driftTolerance: AirPlayRoomTests.driftTolerance)
                .write(toFile: configuration, atomically: true, encoding: .utf8)
            receiverLog = directory.file("shairport-sync.log")
            receiver = try ShairportSync.start(configuration: configuration, alsa: alsa, log: receiverLog)
            serverLog = directory.file("server.log")
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off", "--snapcast-control", "off",
                                                                  "--airplay", "off", "--announce", "off", "--state-dir", directory.file("house"),
                                                                  "--airplay-room", "shair=127.0.0.1:\(receiverPort)"],
                                      standardError: serverLog)
            let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
            control = try HouseControlPort(port: port, stateDirectory: directory.file("house"))
            a = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--state-dir", directory.file("speaker-a"), "--output", "virtual:" + directory.file("a.wav"),
                                                        "--clock-drift-ppm", "35", "--device-drift-ppm", "40"], standardError: directory.file("a.log"))
            b = try ChildProcess(name: "b", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "b", "--state-dir", directory.file("speaker-b"), "--output", "virtual:" + directory.file("b.wav"),
                                                        "--clock-drift-ppm", "-25", "--device-drift-ppm", "-60"], standardError: directory.file("b.log"))
            // The AirPlay room is the household's by being named: no admission asked (the test's
            // own rooms are admitted by waitForRooms).
            try await control.waitForRooms(["a", "b", "shair"])
            // The receiver may start after the house: the room connects again until it plays.
            try await Self.waitForText("streaming to the AirPlay receiver", inFile: serverLog, timeout: 30)
        }

        func stopAll() -> [Int32] {
            [a.interrupt(), b.interrupt(), server.interrupt(), ShairportSync.stop(receiver)]
        }

        static func freePort() throws -> Int {
            let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
            defer { try? channel.close().wait() }
            return channel.localAddress!.port!
        }

        static func waitForText(_ text: String, inFile path: String, timeout: Double) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let content = try? String(contentsOfFile: path, encoding: .utf8), content.contains(text) { return }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            throw TestFailure("\(path): no \"\(text)\" within \(Int(timeout)) s")
        }
    }

    /// shairport-sync's card at 44.1 kHz as if at the stream's 48 kHz: its samples through
    /// libsoxr (whose output is aligned with its input), each period's first frame at its exact
    /// place on the 48 kHz scale, with its emission time moved by the fraction of a frame rounded
    /// off.
    static func atStreamRate(_ capture: VirtualCapture) throws -> VirtualCapture {
        let resampler = try Resampler(inputRate: capture.sampleRate, outputRate: 48000, channelCount: capture.channelCount, quality: .veryHigh)
        var samples: [Float] = []
        capture.samples.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: capture.frameCount, appendingTo: &samples) }
        resampler.flush(appendingTo: &samples)
        let ratio = 48000.0 / Double(capture.sampleRate)
        var frames: [Int64] = [], times: [Int64] = []
        for (frame, time) in zip(capture.periodFrames, capture.periodTimes) {
            let exact = Double(frame) * ratio
            let whole = exact.rounded(.down)
            frames.append(Int64(whole))
            times.append(time - Int64(((exact - whole) * 1e9 / 48000).rounded()))
        }
        let underruns = capture.underruns.map { (frame: Int64((Double($0.frame) * ratio).rounded()), frames: Int64((Double($0.frames) * ratio).rounded())) }
        return VirtualCapture(sampleRate: 48000, channelCount: capture.channelCount, samples: samples, periodFrames: frames, periodTimes: times, underruns: underruns)
    }

    /// The three rooms play a queue while it is used: shair's volume set to 50 %, a seek, and the
    /// playing item removed from the queue (a queue edit that cuts to the next). Room a's card is
    /// the reference: every other room must emit what it emits, when it emits it.
    /// `TUTTI_AIRPLAY_ROOM_SECONDS` (default 30) sets the length.
    @Test(.timeLimit(.minutes(4)))
    func shairportSyncPlaysInSyncWithTuttiRoomsThroughEdits() async throws {
        let seconds = ProcessInfo.processInfo.environment["TUTTI_AIRPLAY_ROOM_SECONDS"].flatMap(Double.init) ?? 30
        let directory = try TemporaryDirectory("airplay-room")
        defer { directory.preserveLogs(as: "airplay-room"); directory.remove() }
        let first = directory.file("first.flac"), second = directory.file("second.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(Int(seconds) + 30):c=pink:a=0.3:seed=31", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", first])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(Int(seconds) + 30):c=brown:a=0.3:seed=32", "-af", "pan=stereo|c0=0.7*c0|c1=c0,aresample=48000", second])
        let house = try await House(directory: directory)
        var stopped = false
        defer { if !stopped { _ = house.stopAll() } }
        _ = try await house.control.send(.play(files: [first, second], rooms: nil))
        try await house.control.waitForPosition(seconds / 6)
        _ = try await house.control.send(.volume(room: "shair", percent: 50))
        try await house.control.waitForPosition(seconds / 3)
        _ = try await house.control.send(.seek(seconds: seconds / 3 + 10))
        try await house.control.waitForPosition(seconds / 3 + 10 + seconds / 3)
        _ = try await house.control.send(.queueRemove(index: 0))
        let editedAt = Date()
        while Date().timeIntervalSince(editedAt) < seconds / 3 {
            try await Task.sleep(nanoseconds: 100_000_000)  // the run's length, not a synchronization
        }
        let exits = house.stopAll()
        stopped = true
        #expect(exits.prefix(3) == [0, 0, 0], "exit statuses a, b, server: \(exits)")

        let a = try VirtualCapture(path: directory.file("a.wav"))
        guard let start = a.firstSoundFrame() else { throw TestFailure("room a played nothing") }
        let reference = Array(a.samples[(start * 2)..<max(start * 2, a.samples.count - 96_000)])
        let shair = try Self.atStreamRate(VirtualCapture(path: directory.file("shair.wav")))
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: a, latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "b", capture: try VirtualCapture(path: directory.file("b.wav")), latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "shair", capture: shair, latencyNanoseconds: 0)],
                                            reference: reference, interval: 4800)
        func skews(_ room: String, after frame: Int = 0) -> [Double] {
            analysis.series.filter { $0.frame >= frame }.compactMap { point in point.heard[room].flatMap { heard in point.heard["a"].map { heard - $0 } } }
        }
        let resyncs = ShairportSync.resyncs(inLog: house.receiverLog)
        for room in ["b", "shair"] {
            let s = skews(room).map(abs).sorted()
            print("\(room) against a over \(Int(seconds)) s: skew p50 \(nearestRankPercentile(s, 50) / 1000) µs, p99 \(nearestRankPercentile(s, 99) / 1000) µs, "
                  + "max \((s.last ?? 0) / 1000) µs over \(s.count) checkpoints; jumps \(analysis.jumps.filter { $0.room == room }.map { ($0.frame, Int($0.frames)) }), "
                  + "unmatched \(analysis.unmatched[room] ?? -1)")
        }
        let settled = skews("shair", after: 10 * 48000).map(abs).sorted()
        print("shair against a after 10 s: skew p50 \(nearestRankPercentile(settled, 50) / 1000) µs, p99 \(nearestRankPercentile(settled, 99) / 1000) µs, max \((settled.last ?? 0) / 1000) µs")
        print("shair − a, µs, each second:", skews("shair").enumerated().filter { $0.offset % 10 == 0 }.map { Int($0.element / 1000) },
              "; shairport-sync resyncs: \(resyncs) (drift tolerance \(Self.driftTolerance * 1000) ms)")
        let shairSkews = skews("shair").map(abs).sorted(), bSkews = skews("b").map(abs).sorted()
        // Every checkpoint (0.1 s) but the edges: no room lost for a moment.
        let expected = Int((seconds - 2) * 10) - 10
        #expect(shairSkews.count >= expected && bSkews.count >= expected, "\(shairSkews.count), \(bSkews.count) of \(expected)")
        // The first bar: within 1 ms, and no resync after the first 10 s.
        #expect(nearestRankPercentile(shairSkews, 99) / 1000 < 1000)
        let after10 = 10 * 48000
        #expect(analysis.jumps.filter { $0.room == "shair" && $0.frame >= after10 }.isEmpty, "\(analysis.jumps)")
        #expect(resyncs <= 1, "shairport-sync resynced \(resyncs) times")
        #expect(nearestRankPercentile(bSkews, 99) / 1000 < 500)
        #expect(analysis.jumps.filter { $0.room == "b" }.isEmpty, "\(analysis.jumps)")
        // shair at 50 %: 30 dB under a, as the house's volume scale says (the room's volume is
        // applied before sending, and the receiver plays at 0 dB).
        let after = analysis.gains.filter { $0.frame > Int(seconds / 6 + 1) * 48000 }.compactMap { point in
            point.gain["shair"].flatMap { shair in point.gain["a"].map { shair / $0 } }
        }
        let ratio = after.sorted()[after.count / 2]
        print("shair at 50 %: gain \(ratio) of a's (expected \(pow(10, -1.5)))")
        #expect(abs(ratio / pow(10, -1.5) - 1) < 0.05)
    }
}
