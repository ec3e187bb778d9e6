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
    /// A configuration naming the card `room` (capturing to `path`), and the environment that
    /// makes ALSA programs read it.
    static func card(in directory: TemporaryDirectory, path: String, ppm: Double, period: Int = 480, buffer: Int = 1920) throws -> String {
        try ALSAVirtualCard.configure([.init(name: "room", path: path, ppm: ppm, period: period, buffer: buffer)], in: directory)
    }

    @Test(.timeLimit(.minutes(1)))
    func aFilePlaysBitExactOnTheCardsSchedule() async throws {
        let directory = try TemporaryDirectory("alsa-virtual")
        defer { directory.remove() }
        let music = directory.file("noise.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=pink:a=0.3:seed=3", "-af", "pan=stereo|c0=c0|c1=0.7*c0", "-ar", "48000", "-c:a", "pcm_f32le", music])
        // A 200 ms buffer, as ALSA's default devices have: what is checked is the card's schedule
        // and the samples, not how small a buffer `tutti play` keeps fed. With 40 ms, CI's
        // real-time phase (twenty suites on two cores) ran it dry twice in about six runs.
        let environment = try Self.card(in: directory, path: directory.file("room.wav"), ppm: 150, buffer: 9600)
        let started = MonotonicClock().now()
        let play = try ChildProcess(name: "play", executable: "/usr/bin/env",
                                    arguments: [environment, ChildProcess.tuttiExecutable, "play", "--output", "alsa:room", music],
                                    standardError: directory.file("play.log"))
        #expect(await play.exit(within: 30) == 0, "\((try? String(contentsOfFile: directory.file("play.log"), encoding: .utf8)) ?? "")")
        let capture = try VirtualCapture(path: directory.file("room.wav"))
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let first = try #require(capture.firstSoundFrame())
        let referenceFirst = try #require((0..<reference.count).first { abs(reference[$0]) > 1e-4 }) / 2
        let frames = min(capture.frameCount - first, reference.count / 2 - referenceFirst)
        let mismatched = (0..<frames * 2).filter { capture.samples[first * 2 + $0] != reference[referenceFirst * 2 + $0] }.count
        print("ALSA virtual card: \(frames) frames played, \(mismatched) samples differ from the file; \(capture.underruns.count) underruns")
        // Where the music and the file part, and by how much: a stall's silence shifts the rest.
        if mismatched > 0, let bad = (0..<frames * 2).first(where: { capture.samples[first * 2 + $0] != reference[referenceFirst * 2 + $0] }) {
            let frame = bad / 2
            let shift = (-48000...48000).first { d in
                let r = referenceFirst + frame + d
                return r >= 0 && r + 100 < reference.count / 2 && (0..<200).allSatisfy { capture.samples[(first + frame) * 2 + $0] == reference[r * 2 + $0] }
            }
            print("ALSA virtual card: first difference at frame \(frame) (capture first sound \(first), reference \(referenceFirst)); the capture matches the file shifted \(String(describing: shift)) frames there; play log: \((try? String(contentsOfFile: directory.file("play.log"), encoding: .utf8)) ?? "")")
        }
        #expect(frames > 95_000 && mismatched == 0 && capture.underruns.isEmpty)
        // Each frame leaves 1 / (48000 × (1 + 150 ppm)) s after the one before: a period of
        // 480 frames, 9 998 500.2 ns (the last point, where the card stopped, is a part period).
        let nanosecondsPerFrame: Double = 1e9 / (48000 * (1 + 150e-6))
        var spacing: [Double] = []
        for index in 1..<capture.periodTimes.count {
            let elapsed = Double(capture.periodTimes[index] - capture.periodTimes[index - 1])
            let frames = Double(capture.periodFrames[index] - capture.periodFrames[index - 1])
            spacing.append(elapsed - frames * nanosecondsPerFrame)
        }
        #expect(capture.periodFrames.dropLast().allSatisfy { $0 % 480 == 0 })
        #expect(spacing.allSatisfy { abs($0) <= 1 }, "\(spacing.prefix(5))")
        // It started when the program started it, on the machine's monotonic clock.
        let startedAfterMs = (Double(capture.periodTimes[0]) - Double(started)) / 1e6
        #expect(startedAfterMs > 0 && startedAfterMs < 5000)
    }

    /// `aplay` (alsa-utils), a program that is not Tutti's, plays 60 s to the card with a
    /// crystal 5000 ppm slow: the card emits the file bit for bit at exactly 48000 × 0.995
    /// frames per second of true time, so aplay, which waits for the last frame to leave, takes
    /// the 60.3 s that schedule gives, measured here on this process's own monotonic clock.
    @Test(.timeLimit(.minutes(2)))
    func aplayPlaysSixtySecondsAtTheCardsRate() async throws {
        let directory = try TemporaryDirectory("alsa-aplay")
        defer { directory.remove() }
        let music = directory.file("noise.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=60:c=white:a=0.2:seed=5", "-af", "pan=stereo|c0=c0|c1=-0.5*c0", "-ar", "48000", "-c:a", "pcm_f32le", music])
        let ppm = -5000.0
        let environment = try Self.card(in: directory, path: directory.file("room.wav"), ppm: ppm)
        let launched = MonotonicClock().now()
        let aplay = try ChildProcess(name: "aplay", executable: "/usr/bin/env", arguments: [environment, "aplay", "-q", "-D", "room", music],
                                     standardError: directory.file("aplay.log"))
        #expect(await aplay.exit(within: 90) == 0, "\((try? String(contentsOfFile: directory.file("aplay.log"), encoding: .utf8)) ?? "")")
        let exited = MonotonicClock().now()
        let capture = try VirtualCapture(path: directory.file("room.wav"))
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let mismatched = zip(capture.samples, reference).filter { $0 != $1 }.count
        #expect(capture.frameCount == reference.count / 2 && mismatched == 0, "\(capture.frameCount) frames, \(mismatched) samples differ")
        #expect(capture.underruns.isEmpty)
        // The schedule the card wrote: first to last frame at 48000 × (1 + ppm) frames a second.
        let frames = Double(capture.periodFrames.last! - capture.periodFrames.first!)
        let seconds = Double(capture.periodTimes.last! - capture.periodTimes.first!) / 1e9
        let rate = frames / seconds, expectedRate = 48000 * (1 + ppm * 1e-6)
        // And the truth: aplay ran from launch until the last frame left, on our clock.
        let expectedSeconds = Double(reference.count / 2) / expectedRate
        let wallSeconds = Double(exited - launched) / 1e9
        let startedAfter = Double(capture.periodTimes.first! - launched) / 1e9
        print("aplay: \(capture.frameCount) frames, bit-exact \(mismatched == 0); card rate \(rate) frames/s (expected \(expectedRate)); "
              + "aplay took \(wallSeconds) s of true time against \(expectedSeconds) s, starting \(startedAfter * 1000) ms after launch")
        #expect(abs(rate - expectedRate) < 0.001)
        // Launch and exit add a little; a card at its nominal rate would have taken 0.3 s less.
        #expect(wallSeconds - expectedSeconds > 0 && wallSeconds - expectedSeconds < 0.15)
        #expect(capture.periodTimes.last! <= exited && startedAfter > 0)
    }

    /// A house with room a on `virtual:` (+40 ppm) and room b through Tutti's ALSA output to
    /// the card, both connected with settled clocks.
    struct TwoRooms {
        let server: ChildProcess, a: ChildProcess, b: ChildProcess
        let control: HouseControlPort

        init(directory: TemporaryDirectory, environment: String) async throws {
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off"],
                                      standardError: directory.file("server.log"))
            let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
            control = try HouseControlPort(port: port)
            a = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--state-dir", directory.file("speaker-a"), "--output", "virtual:" + directory.file("a.wav"),
                                                        "--device-drift-ppm", "40"], standardError: directory.file("a.log"))
            b = try ChildProcess(name: "b", executable: "/usr/bin/env",
                                 arguments: [environment, ChildProcess.tuttiExecutable, "speaker", "--server", "127.0.0.1:\(port)", "--name", "b", "--state-dir", directory.file("speaker-b"),
                                             "--output", "alsa:room"], standardError: directory.file("b.log"))
            try await control.waitForRooms(["a", "b"])
        }

        func stopAll() {
            a.interrupt()
            b.interrupt()
            server.interrupt()
        }
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
        let house = try await TwoRooms(directory: directory, environment: environment)
        defer { house.stopAll() }
        _ = try await house.control.send(.play(files: [music], rooms: nil))
        try await house.control.waitForPosition(8)
        #expect(house.a.interrupt() == 0 && house.b.interrupt() == 0)

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

    /// Room b's card goes through what cards go through in a home, while a plays on:
    /// - it vanishes for 2 s (`ENODEV`: unplugged) and comes back with periods of 1024 frames
    ///   instead of 480;
    /// - it is suspended for 1.5 s (`ESTRPIPE`);
    /// - the speaker is stopped for 300 ms (SIGSTOP), so the card runs dry: an xrun.
    /// After each, b must emit the timeline in sync with a again, having skipped exactly what
    /// it missed: its card's silent stretches are where a went on alone.
    @Test(.timeLimit(.minutes(3)))
    func anALSARoomRecoversInSyncFromRouteChangesAndXruns() async throws {
        let directory = try TemporaryDirectory("alsa-recovery")
        defer { directory.preserveLogs(as: "alsa-recovery"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=26:c=pink:a=0.3:seed=11", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", music])
        let card = directory.file("b.wav")
        let environment = try Self.card(in: directory, path: card, ppm: -80)
        let house = try await TwoRooms(directory: directory, environment: environment)
        defer { house.stopAll() }
        _ = try await house.control.send(.play(files: [music], rooms: nil))
        try await house.control.waitForPosition(4)
        // 8192 bytes: 1024 frames of 32-bit stereo.
        try "8192".write(toFile: card + ".period", atomically: true, encoding: .utf8)
        try "ENODEV 2000".write(toFile: card + ".fail", atomically: true, encoding: .utf8)
        try await house.control.waitForPosition(11)
        try "ESTRPIPE 1500".write(toFile: card + ".fail", atomically: true, encoding: .utf8)
        try await house.control.waitForPosition(17)
        house.b.process.send(SIGSTOP)
        try await Task.sleep(nanoseconds: 300_000_000)  // the fault itself: a stalled process
        house.b.process.send(SIGCONT)
        try await house.control.waitForPosition(23)
        #expect(house.a.interrupt() == 0 && house.b.interrupt() == 0)

        let a = try VirtualCapture(path: directory.file("a.wav")), b = try VirtualCapture(path: card)
        // The card's own record of its silent stretches: where one run ended and the next began.
        var gaps: [(frame: Int64, nanoseconds: Int64)] = []
        for index in 1..<b.periodFrames.count where b.periodFrames[index] == b.periodFrames[index - 1] {
            gaps.append((b.periodFrames[index], b.periodTimes[index] - b.periodTimes[index - 1]))
        }
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: a, latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "b", capture: b, latencyNanoseconds: 0)],
                                            reference: reference, interval: 4800)
        // Skew where both played, leaving out the first checkpoint after each of b's gaps (the
        // 100 ms after a return, when b may still be refilling).
        var skews: [Double] = [], bHeard = 0, bMissing = 0
        var previousHadB = false
        for point in analysis.series {
            guard let heardA = point.heard["a"] else { continue }
            if let heardB = point.heard["b"] {
                bHeard += 1
                if previousHadB { skews.append(abs(heardB - heardA)) }
                previousHadB = true
            } else {
                bMissing += 1
                previousHadB = false
            }
        }
        skews.sort()
        let p50 = nearestRankPercentile(skews, 50) / 1000, p99 = nearestRankPercentile(skews, 99) / 1000
        let jumps = analysis.jumps.filter { $0.room == "b" }.map(\.frames)
        print("ALSA recovery: card gaps \(gaps.map { "\(Double($0.nanoseconds / 10_000) / 100) ms at frame \($0.frame)" }); b's jumps \(jumps.map { Int($0) }) frames; "
              + "skew p50 \(p50) µs, p99 \(p99) µs, max \((skews.last ?? 0) / 1000) µs over \(skews.count) checkpoints; b missing at \(bMissing) of \(bHeard + bMissing); "
              + "card periods \(Set(zip(b.periodFrames.dropFirst(), b.periodFrames).map { $0 - $1 }.filter { $0 >= 480 }).sorted())")
        // Three stretches of silence: the 2 s unplug, the 1.5 s suspend, the stall.
        #expect(gaps.count == 3, "\(gaps)")
        if gaps.count == 3 {
            #expect(gaps[0].nanoseconds > 1_900_000_000 && gaps[0].nanoseconds < 2_600_000_000)
            #expect(gaps[1].nanoseconds > 1_400_000_000 && gaps[1].nanoseconds < 2_100_000_000)
            #expect(gaps[2].nanoseconds > 150_000_000 && gaps[2].nanoseconds < 1_000_000_000)
        }
        // b skipped the timeline by exactly the time its card was silent: what it missed was
        // accounted from time stamps (the content jumps by the gap at 48 kHz, within 5 frames).
        #expect(jumps.count == gaps.count)
        for (jump, gap) in zip(jumps, gaps) {
            #expect(abs(jump + Double(gap.nanoseconds) * 48000 / 1e9) <= 5, "jump \(jump) frames over a gap of \(gap.nanoseconds) ns")
        }
        // It came back with the new period: points 1024 frames apart after the first gap.
        let spacingAfter = zip(b.periodFrames.dropFirst(), b.periodFrames).map { $0 - $1 }.filter { $0 > 0 }
        #expect(spacingAfter.contains(1024) && spacingAfter.contains(480))
        // In sync after each return, and heard again at once: b misses only the checkpoints of
        // its silent stretches (2 + 1.5 + 0.3 s of 0.1 s checkpoints, and one either side).
        #expect(skews.count > 120)
        #expect(p99 < 200, "skew p99 \(p99) µs")
        #expect(bMissing <= 46, "b missing at \(bMissing) checkpoints")
        #expect(analysis.jumps.filter { $0.room == "a" }.isEmpty)
    }
}
