import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
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
    /// A second card, `shaircard2` (`shair2.wav`, −20 ppm), is there for a receiver started again.
    final class House: @unchecked Sendable {
        let server: ChildProcess, a: ChildProcess, b: ChildProcess
        private(set) var receiver: ChildProcess
        let control: HouseControlPort
        let serverLog: String
        private(set) var receiverLog: String
        let directory: TemporaryDirectory, alsa: String, receiverPort: Int

        init(directory: TemporaryDirectory) async throws {
            self.directory = directory
            alsa = try ALSAVirtualCard.configure([.init(name: "shaircard", path: directory.file("shair.wav"), ppm: 30, period: 441, buffer: 1764),
                                                  .init(name: "shaircard2", path: directory.file("shair2.wav"), ppm: -20, period: 441, buffer: 1764)], in: directory)
            receiverPort = try Self.freePort()
            receiverLog = directory.file("shairport-sync.log")
            receiver = try Self.startReceiver(card: "shaircard", port: receiverPort, alsa: alsa, directory: directory, log: receiverLog)
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

        static func startReceiver(card: String, port: Int, alsa: String, directory: TemporaryDirectory, log: String) throws -> ChildProcess {
            let configuration = directory.file("\(card).conf")
            try ShairportSync.configuration(name: "Shair", port: port, card: card, driftTolerance: AirPlayRoomTests.driftTolerance)
                .write(toFile: configuration, atomically: true, encoding: .utf8)
            return try ShairportSync.start(configuration: configuration, alsa: alsa, log: log)
        }

        /// The receiver killed, as a power cut would.
        func killReceiver() {
            receiver.process.send(SIGKILL)
            _ = receiver.waitForExit(timeout: 10)
        }

        /// A receiver on the same port again, playing to `shaircard2`.
        func restartReceiver() throws {
            receiverLog = directory.file("shairport-sync-2.log")
            receiver = try Self.startReceiver(card: "shaircard2", port: receiverPort, alsa: alsa, directory: directory, log: receiverLog)
        }

        func stopAll() -> [Int32] {
            [a.interrupt(), b.interrupt(), server.interrupt(), ShairportSync.stop(receiver)]
        }

        /// Stops every process, and compares rooms b and shair (the receiver's card, at 44.1 kHz,
        /// converted to the stream's 48 kHz) with room a every 0.1 s, a's card from its first
        /// sound being the reference: every other room must emit what it emits, when it does.
        func stopAndAnalyse(receiverCard: String) throws -> SyncAnalysis.Result {
            let exits = stopAll()
            #expect(exits.prefix(3) == [0, 0, 0], "exit statuses a, b, server: \(exits)")
            let a = try VirtualCapture(path: directory.file("a.wav"))
            guard let start = a.firstSoundFrame() else { throw TestFailure("room a played nothing") }
            let reference = Array(a.samples[(start * 2)..<max(start * 2, a.samples.count - 96_000)])
            return SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: a, latencyNanoseconds: 0),
                                                SyncAnalysis.Room(name: "b", capture: try VirtualCapture(path: directory.file("b.wav")), latencyNanoseconds: 0),
                                                SyncAnalysis.Room(name: "shair", capture: try VirtualCapture(path: directory.file(receiverCard)).converted(toSampleRate: 48000),
                                                                  latencyNanoseconds: 0)],
                                        reference: reference, interval: 4800)
        }

        static func freePort() throws -> Int {
            let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
            defer { try? channel.close().wait() }
            return channel.localAddress!.port!
        }

        static func waitForText(_ text: String, count: Int = 1, inFile path: String, timeout: Double) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let content = try? String(contentsOfFile: path, encoding: .utf8), content.components(separatedBy: text).count - 1 >= count { return }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            throw TestFailure("\(path): no \"\(text)\" within \(Int(timeout)) s")
        }
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
        let analysis = try house.stopAndAnalyse(receiverCard: "shair.wav")
        stopped = true
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
        // The issue's first bar: within 1 ms, and no resync after the first 10 s. shairport-sync
        // corrects by a frame a packet (up to 13 frames, 280 µs, in a checkpoint's 0.1 s: the
        // analysis' "jumps" of 6–13 frames seen in every run); a resync (its buffer flushed or
        // padded past its 50 ms threshold) it logs, and would move it by more than 1 ms at once.
        #expect(nearestRankPercentile(shairSkews, 99) / 1000 < 1000)
        let after10 = 10 * 48000
        #expect(analysis.jumps.filter { $0.room == "shair" && $0.frame >= after10 && abs($0.frames) > 48 }.isEmpty, "\(analysis.jumps)")
        #expect(resyncs <= 1, "shairport-sync resynced \(resyncs) times")
        #expect(nearestRankPercentile(bSkews, 99) / 1000 < 500)
        #expect(analysis.jumps.filter { $0.room == "b" }.isEmpty, "\(analysis.jumps)")
        // shair at 50 %: 30 dB under a, as the house's volume scale says (the room's volume is
        // applied before sending, and the receiver plays at 0 dB).
        let after = analysis.gains.filter { $0.frame > Int(seconds / 6 + 1) * 48000 }.compactMap { point in
            point.gain["shair"].flatMap { shair in point.gain["a"].map { shair / $0 } }
        }
        let ratio = after.isEmpty ? .nan : after.sorted()[after.count / 2]
        print("shair at 50 %: gain \(ratio) of a's (expected \(pow(10, -1.5)))")
        #expect(abs(ratio / pow(10, -1.5) - 1) < 0.05)
    }

    /// The receiver dies mid-track (SIGKILL, as a power cut) and comes back on its port: the
    /// room stays in the house, silent, with the reason as its problem; it connects again by
    /// itself and plays in sync with the Tutti rooms, and they never noticed.
    @Test(.timeLimit(.minutes(4)))
    func aReceiverThatDiesAndComesBackPlaysAgainInSync() async throws {
        let directory = try TemporaryDirectory("airplay-room-restart")
        defer { directory.preserveLogs(as: "airplay-room-restart"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=90:c=pink:a=0.3:seed=33", "-af", "pan=stereo|c0=c0|c1=0.6*c0,aresample=48000", music])
        let house = try await House(directory: directory)
        var stopped = false
        defer { if !stopped { _ = house.stopAll() } }
        _ = try await house.control.send(.play(files: [music], rooms: nil))
        try await house.control.waitForPosition(5)
        house.killReceiver()
        // The room says why it is silent.
        var problem: String?
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, problem == nil {
            problem = try await house.control.send(.rooms).rooms?.rooms.first { $0.name == "shair" }?.problem
            if problem == nil { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        #expect(problem?.contains("AirPlay receiver at 127.0.0.1:\(house.receiverPort) is not playing") == true, "\(problem ?? "no problem reported")")
        try house.restartReceiver()
        try await House.waitForText("streaming to the AirPlay receiver", count: 2, inFile: house.serverLog, timeout: 60)
        let back = Date()
        while Date().timeIntervalSince(back) < 25 {
            try await Task.sleep(nanoseconds: 100_000_000)  // the run's length, not a synchronization
        }
        let analysis = try house.stopAndAnalyse(receiverCard: "shair2.wav")
        stopped = true
        // The receiver started again: from 10 s after its first sound on (shairport-sync's own
        // start hunts by up to 1.2 ms for several seconds, measured, as at a first start).
        let heard = analysis.series.filter { $0.heard["shair"] != nil }
        let settledFrom = (heard.first?.frame ?? 0) + 10 * 48000
        let skews = heard.filter { $0.frame >= settledFrom }.compactMap { point in point.heard["shair"].flatMap { s in point.heard["a"].map { abs(s - $0) } } }.sorted()
        let bSkews = analysis.series.compactMap { point in point.heard["b"].flatMap { b in point.heard["a"].map { abs(b - $0) } } }.sorted()
        print("the receiver started again: \(heard.count) checkpoints heard, skew to a after its first 10 s p50 \(nearestRankPercentile(skews, 50) / 1000) µs, "
              + "p99 \(nearestRankPercentile(skews, 99) / 1000) µs, max \((skews.last ?? 0) / 1000) µs over \(skews.count); b p99 \(nearestRankPercentile(bSkews, 99) / 1000) µs; "
              + "jumps \(analysis.jumps.map { ($0.room, $0.frame, Int($0.frames)) })")
        #expect(skews.count >= 100, "\(skews.count) checkpoints of the restarted receiver")
        #expect(nearestRankPercentile(skews, 99) / 1000 < 1000)
        // The Tutti rooms played on through it all.
        #expect(nearestRankPercentile(bSkews, 99) / 1000 < 500 && analysis.jumps.filter { $0.room == "b" }.isEmpty)
        #expect(analysis.unmatched["b"] == 0)
    }

    /// A receiver announced on the network (the sandbox's Avahi) is found by a house that
    /// listens there: it waits to be admitted, without taking the receiver meanwhile; the
    /// house's own group, announced as an AirPlay receiver too, is not taken for one; once
    /// admitted the room plays on the receiver's card.
    @Test(.timeLimit(.minutes(3)))
    func aReceiverOnTheNetworkIsFoundAndWaitsToBeAdmitted() async throws {
        let directory = try TemporaryDirectory("airplay-room-found")
        defer { directory.preserveLogs(as: "airplay-room-found"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=30:c=pink:a=0.3:seed=34", "-af", "pan=stereo|c0=c0|c1=0.6*c0,aresample=48000", music])
        let alsa = try ALSAVirtualCard.configure([.init(name: "porchcard", path: directory.file("porch.wav"), ppm: 0, period: 441, buffer: 1764)], in: directory)
        let configuration = directory.file("porch.conf")
        try ShairportSync.configuration(name: "Porch", port: try House.freePort(), card: "porchcard", driftTolerance: Self.driftTolerance)
            .write(toFile: configuration, atomically: true, encoding: .utf8)
        let receiverLog = directory.file("porch.log")
        let receiver = try ShairportSync.start(configuration: configuration, alsa: alsa, log: receiverLog)
        let serverLog = directory.file("server.log")
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "10.77.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off", "--snapcast-control", "off",
                                                                  "--airplay", "10.77.0.1:0", "--state-dir", directory.file("house"), "--name", "Found House"],
                                      standardError: serverLog)
        defer {
            server.interrupt()
            _ = ShairportSync.stop(receiver)
        }
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let control = try HouseControlPort(host: "10.77.0.1", port: port, stateDirectory: directory.file("house"))
        // Found, and waiting; the house's own group (announced as "Found House") is not a room.
        var waiting: [String] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !waiting.contains("Porch") {
            waiting = try await control.send(.rooms).rooms?.waiting?.map(\.name) ?? []
            if !waiting.contains("Porch") { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        // (The receivers of the suite's earlier tests may linger in Avahi's cache: only Porch
        // and the house's own name are looked at.)
        #expect(waiting.contains("Porch") && !waiting.contains("Found House"), "waiting: \(waiting)")
        // Waiting, it has not taken the receiver (a phone could still play to it).
        try await Task.sleep(nanoseconds: 2_000_000_000)  // a room that took it would have by now: a guard, not a synchronization
        #expect(!((try? String(contentsOfFile: receiverLog, encoding: .utf8)) ?? "").contains("SETUP"), "the receiver was set up before its room was admitted")
        _ = try await control.send(.admit(speaker: "Porch"))
        try await House.waitForText("AirPlay room Porch: streaming to the AirPlay receiver", inFile: serverLog, timeout: 30)
        _ = try await control.send(.play(files: [music], rooms: nil))
        try await control.waitForPosition(4)
        server.interrupt()
        _ = ShairportSync.stop(receiver)
        let porch = try VirtualCapture(path: directory.file("porch.wav"))
        let heard = porch.firstSoundFrame().map { porch.frameCount - $0 } ?? 0
        print("the found receiver played \(Double(heard) / 44100) s")
        #expect(heard > 44100, "the found receiver's card played \(heard) frames")
    }
}
