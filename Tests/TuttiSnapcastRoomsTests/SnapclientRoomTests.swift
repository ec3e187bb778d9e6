import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Debian's snapclient 0.26 joins the house on its Snapcast port and plays, through the ALSA
/// virtual card (Devices/alsa-virtual), beside a Tutti room on `virtual:`; the two cards'
/// output is compared sample by sample.
@Suite(.serialized) struct SnapclientRoomTests {
    static let fakeTime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    /// The house and its rooms, each on a clock and a sound card of its own:
    /// - the house, its clock `TUTTI_HOUSE_CLOCK_PPM` off (default 0; `--clock-drift-ppm`:
    ///   libfaketime's preload makes a Swift process lose its arguments when the test runner
    ///   starts it);
    /// - Tutti room a on `virtual:`, its clock +35 ppm and its card +40 ppm;
    /// - Tutti room b through its ALSA output to a virtual card at −60 ppm, its clock −25 ppm;
    /// - snapclient `snap1` on a virtual card at +30 ppm, its clock `TUTTI_SNAPCLIENT_CLOCK_PPM`
    ///   off (default 0; libfaketime). snapclient has no clock-rate model, so clocks that drift
    ///   from the house's are measured (docs/SNAPCAST.md), not held to the bounds below.
    struct House {
        let server: ChildProcess, a: ChildProcess, b: ChildProcess, snapclient: ChildProcess
        let control: HouseControlPort

        init(directory: TemporaryDirectory) async throws {
            guard FileManager.default.fileExists(atPath: SnapclientRoomTests.fakeTime) else {
                throw TestFailure("\(SnapclientRoomTests.fakeTime) is missing: install Debian's libfaketime (make deps does)")
            }
            let alsa = try ALSAVirtualCard.configure([.init(name: "snapcard", path: directory.file("snap1.wav"), ppm: 30),
                                                      .init(name: "bcard", path: directory.file("b.wav"), ppm: -60)], in: directory)
            func faked(_ ppm: Double) -> [String] {
                ppm == 0 ? [] : ["LD_PRELOAD=" + SnapclientRoomTests.fakeTime, "FAKETIME=+0 x\(1 + ppm * 1e-6)", "FAKETIME_NO_CACHE=1"]
            }
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--clock-drift-ppm", ProcessInfo.processInfo.environment["TUTTI_HOUSE_CLOCK_PPM"] ?? "0",
                                                                  "--snapcast-control", "off", "--snapcast", "127.0.0.1:0"],
                                      standardError: directory.file("server.log"))
            let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
            control = try HouseControlPort(port: port)
            let snapcastLine = try server.waitForLine(containing: "snapclients on")
            let snapcastPort = String(snapcastLine.split(separator: " ")[4].split(separator: ":").last!)
            a = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--state-dir", directory.file("speaker-a"), "--output", "virtual:" + directory.file("a.wav"),
                                                        "--clock-drift-ppm", "35", "--device-drift-ppm", "40"], standardError: directory.file("a.log"))
            b = try ChildProcess(name: "b", executable: "/usr/bin/env",
                                 arguments: [alsa, ChildProcess.tuttiExecutable, "speaker", "--server", "127.0.0.1:\(port)", "--name", "b", "--state-dir", directory.file("speaker-b"),
                                             "--clock-drift-ppm", "-25", "--output", "alsa:bcard"], standardError: directory.file("b.log"))
            snapclient = try Snapclient.start(hostID: "snap1", port: snapcastPort, card: "snapcard", alsa: alsa,
                                              environment: faked(ProcessInfo.processInfo.environment["TUTTI_SNAPCLIENT_CLOCK_PPM"].flatMap(Double.init) ?? 0),
                                              log: directory.file("snapclient.log"))
            try await control.waitForRooms(["a", "b", "snap1"])
        }

        func stopAll() -> [Int32] {
            return [a.interrupt(), b.interrupt(), Snapclient.stop(snapclient), server.interrupt()]
        }
    }

    /// The three rooms play a queue while it is used: snap1's volume set to 50 %, a seek, and
    /// the playing item removed from the queue (a queue edit that cuts to the next). Room a's
    /// card is the reference: every other room must emit what it emits, when it emits it.
    /// `TUTTI_SNAPCLIENT_SECONDS` (default 24) sets the length; 180 is the measurement.
    @Test(.timeLimit(.minutes(6)))
    func aSnapclientPlaysInSyncWithTuttiRoomsThroughEdits() async throws {
        let seconds = ProcessInfo.processInfo.environment["TUTTI_SNAPCLIENT_SECONDS"].flatMap(Double.init) ?? 24
        let directory = try TemporaryDirectory("snapclient-room")
        defer { directory.preserveLogs(as: "snapclient-room"); directory.remove() }
        let first = directory.file("first.flac"), second = directory.file("second.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(Int(seconds) + 30):c=pink:a=0.3:seed=21", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", first])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(Int(seconds) + 30):c=brown:a=0.3:seed=22", "-af", "pan=stereo|c0=0.7*c0|c1=c0,aresample=48000", second])
        let house = try await House(directory: directory)
        var stopped = false
        defer { if !stopped { _ = house.stopAll() } }
        _ = try await house.control.send(.play(files: [first, second], rooms: nil))
        try await house.control.waitForPosition(seconds / 6)
        _ = try await house.control.send(.volume(room: "snap1", percent: 50))
        try await house.control.waitForPosition(seconds / 3)
        _ = try await house.control.send(.seek(seconds: seconds / 3 + 10))
        try await house.control.waitForPosition(seconds / 3 + 10 + seconds / 3)
        _ = try await house.control.send(.queueRemove(index: 0))
        // The second item plays from its start: wait out the rest of the run in it.
        let editedAt = Date()
        while Date().timeIntervalSince(editedAt) < seconds / 3 {
            try await Task.sleep(nanoseconds: 100_000_000)  // the run's length, not a synchronization
        }
        let exits = house.stopAll()
        stopped = true
        #expect(exits == [0, 0, 0, 0], "exit statuses a, b, snapclient, server: \(exits)")

        let a = try VirtualCapture(path: directory.file("a.wav"))
        guard let start = a.firstSoundFrame() else { throw TestFailure("room a played nothing") }
        // The reference: what room a emitted, from its first sound to a second before it stopped.
        let reference = Array(a.samples[(start * 2)..<max(start * 2, a.samples.count - 96_000)])
        let rooms = ["b", "snap1"].map { name in
            (name, Result { try VirtualCapture(path: directory.file("\(name).wav")) })
        }
        var analysed = [SyncAnalysis.Room(name: "a", capture: a, latencyNanoseconds: 0)]
        for (name, capture) in rooms { analysed.append(SyncAnalysis.Room(name: name, capture: try capture.get(), latencyNanoseconds: 0)) }
        // Skew of each room against a: a's own lag is its first sound, as the reference starts there.
        let analysis = SyncAnalysis.analyse(rooms: analysed, reference: reference, interval: 4800)
        func skews(_ room: String) -> [Double] {
            analysis.series.compactMap { point in point.heard[room].flatMap { heard in point.heard["a"].map { abs(heard - $0) } } }.sorted()
        }
        for room in ["b", "snap1"] {
            let s = skews(room)
            print("\(room) against a over \(Int(seconds)) s: skew p50 \(nearestRankPercentile(s, 50) / 1000) µs, p99 \(nearestRankPercentile(s, 99) / 1000) µs, "
                  + "max \((s.last ?? 0) / 1000) µs over \(s.count) checkpoints; jumps \(analysis.jumps.filter { $0.room == room }.map { Int($0.frames) }), "
                  + "underruns \(analysis.underruns[room] ?? -1)")
        }
        // snap1 − a each second: snapclient's own control loop shows in it.
        print("snap1 − a, µs, each second:", analysis.series.enumerated().filter { $0.offset % 10 == 0 }.compactMap { point in
            point.element.heard["snap1"].flatMap { snap in point.element.heard["a"].map { Int((snap - $0) / 1000) } }
        })
        let snapSkews = skews("snap1"), bSkews = skews("b")
        // Every checkpoint (0.1 s) but the edges: no room lost for a moment.
        let expected = Int((seconds - 2) * 10) - 10
        #expect(snapSkews.count >= expected && bSkews.count >= expected, "\(snapSkews.count), \(bSkews.count) of \(expected)")
        // snapclient corrects its own card's drift only once its median windows fill (≈ 10 s
        // after it starts), then within its ±100 µs dead band (docs/SNAPCAST.md): the short
        // run's p99 holds its start and its hunting inside that band (measured 0.23–0.81 ms in
        // seven runs); Snapcast's 200 µs is the long run's. With its clock drifting from the
        // house's it swings further (measured, docs/SNAPCAST.md).
        let drifting = ProcessInfo.processInfo.environment["TUTTI_SNAPCLIENT_CLOCK_PPM"] != nil || ProcessInfo.processInfo.environment["TUTTI_HOUSE_CLOCK_PPM"] != nil
        if !drifting {
            #expect(nearestRankPercentile(snapSkews, 50) / 1000 < 300)
            #expect(nearestRankPercentile(snapSkews, 99) / 1000 < 1000)
        }
        // b, Tutti's ALSA output with a simulated clock skew: p99 32–132 µs in eight runs.
        // (Its excursions of 0.3–0.8 ms were the clock estimate's after a loaded start, fixed:
        // docs/MULTIROOM.md, "Lines that tilt together".)
        #expect(nearestRankPercentile(bSkews, 99) / 1000 < 500)
        // No hard resync (an audible jump) in any room, through the volume change, the seek and
        // the edit; the only underrun is snapclient's at its start (it lets the card run dry
        // until the first chunk, as on real hardware).
        #expect(analysis.jumps.isEmpty, "\(analysis.jumps)")
        #expect(analysis.underruns["b"] == 0 && (analysis.underruns["snap1"] ?? 9) <= 1)
        // snap1 at 50 %: 30 dB under a, as the house's volume scale says.
        let after = analysis.gains.filter { $0.frame > Int(seconds / 6 + 1) * 48000 }.compactMap { point in
            point.gain["snap1"].flatMap { snap in point.gain["a"].map { snap / $0 } }
        }
        let ratio = after.sorted()[after.count / 2]
        print("snap1 at 50 %: gain \(ratio) of a's (expected \(pow(10, -1.5)))")
        #expect(abs(ratio / pow(10, -1.5) - 1) < 0.02)
    }
}
