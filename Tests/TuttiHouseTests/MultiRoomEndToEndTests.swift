import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
import TuttiEngine
@testable import TuttiDiagnostics
import TuttiTestSupport

/// A house and three rooms as separate processes on loopback, each room with its own skewed
/// clock, drifting sound card and (one) amplifier latency. Checks what the virtual sound cards
/// actually emitted: every room plays the stream sample-aligned, a room joining mid-track
/// starts in sync, a room leaving disturbs nobody.
@Suite(.serialized) struct MultiRoomEndToEndTests {
    func send(_ command: ControlCommand, port: Int) async throws -> ControlReply {
        try await ControlClient.send(command, host: "127.0.0.1", port: port, token: try HouseTokens.token(port: port), group: MultiThreadedEventLoopGroup.singleton)
    }

    /// The rooms' reports, once the speakers waiting are admitted.
    func rooms(_ port: Int) async throws -> [String: RoomReport] {
        let list = try await HouseControlPort.admitWaiting(port: port, token: HouseTokens.token(port: port)).rooms
        return Dictionary(uniqueKeysWithValues: list.map { ($0.name, $0) })
    }

    /// Waits (guarded) until `condition` holds for the rooms' reports.
    func waitForRooms(_ port: Int, timeout: Double = 30, _ condition: ([String: RoomReport]) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(try await rooms(port)) { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw TestFailure("rooms did not reach the expected state: \(try await rooms(port))")
    }

    /// A speaker process's simulated machine: clock offset (ms), clock and crystal drifts (ppm),
    /// amplifier latency (ms), as the CLI takes them.
    struct RoomSpec {
        var name, offset, drift, device, latency: String
    }

    /// A house process; `port` 0 picks a free one. Each start appends to `server.log`.
    func startServer(in directory: TemporaryDirectory, port: Int = 0, arguments: [String] = []) throws -> (server: ChildProcess, port: Int) {
        let log = directory.file(port == 0 ? "server.log" : "server-\(port)-\(UInt32.random(in: 0...UInt32.max)).log")
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:\(port)", "--state-dir", directory.file("state")] + arguments,
                                      standardError: log)
        let line = try server.waitForLine(containing: "listening on")
        let boundPort = Int(line.split(separator: ":").last!.split(separator: " ").first!)!
        try HouseTokens.remember(port: boundPort, stateDirectory: directory.file("state"))
        return (server, boundPort)
    }

    /// A speaker process for `room`, connecting to the house (or a proxy) at `port`, its
    /// virtual sound card writing `<directory>/<output>.wav` (the room's name by default), and
    /// its clock estimate against the truth `<directory>/<output>.truth.jsonl`.
    func startSpeaker(_ room: RoomSpec, port: Int, in directory: TemporaryDirectory, output: String? = nil) throws -> ChildProcess {
        let file = output ?? room.name
        return try ChildProcess(name: file, arguments: [
            "speaker", "--server", "127.0.0.1:\(port)", "--name", room.name, "--output", "virtual:" + directory.file("\(file).wav"),
            "--state-dir", directory.file("speaker-\(room.name)"),
            "--clock-offset-ms", room.offset, "--clock-drift-ppm", room.drift, "--device-drift-ppm", room.device, "--latency-ms", room.latency,
            "--clock-truth", directory.file("\(file).truth.jsonl"),
        ], standardError: directory.file("\(file).log"))
    }

    /// Starts a server and one speaker per room (virtual sound cards writing
    /// `<directory>/<name>.wav`), and waits until every room is connected with a converged clock.
    func startHouse(in directory: TemporaryDirectory, rooms: [RoomSpec]) async throws -> (server: ChildProcess, port: Int, speakers: [ChildProcess]) {
        let (server, port, speakers, _) = try await startHouse(in: directory, rooms: rooms, proxying: nil)
        return (server, port, speakers)
    }

    /// The same, with the room named `proxying` (if any) reaching the house through an
    /// `ImpairmentProxy` that acts as a home network (`homeNetwork`); returns the proxy and
    /// the port it listens on.
    func startHouse(in directory: TemporaryDirectory, rooms: [RoomSpec], proxying: String?, impairment: ImpairmentProxy.Impairment = homeNetwork)
        async throws -> (server: ChildProcess, port: Int, speakers: [ChildProcess], proxy: (proxy: ImpairmentProxy, port: Int)?) {
        let (server, port) = try startServer(in: directory)
        var speakers: [ChildProcess] = []
        var proxy: (proxy: ImpairmentProxy, port: Int)?
        do {
            if proxying != nil { proxy = try await startProxy(to: port, impairment: impairment) }
            for room in rooms { speakers.append(try startSpeaker(room, port: room.name == proxying ? proxy!.port : port, in: directory)) }
            try await waitForRooms(port) { reports in
                reports.count == rooms.count && reports.values.allSatisfy(\.hasSettledClock)
            }
        } catch {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
            try? await proxy?.proxy.stop()
            throw error
        }
        return (server, port, speakers, proxy)
    }

    /// A home network between one room and the house: 1 ms each way, give or take 0.25 ms
    /// (uniform, seeded), for UDP datagrams and TCP segments alike.
    static let homeNetwork = ImpairmentProxy.Impairment(delayNanoseconds: 1_000_000, jitterNanoseconds: 250_000, seed: 10)

    /// An impairment proxy in front of the house at `port`, acting as `homeNetwork`.
    func startProxy(to port: Int, impairment: ImpairmentProxy.Impairment = Self.homeNetwork) async throws -> (proxy: ImpairmentProxy, port: Int) {
        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: port, impairment: impairment)
        return (proxy, try await proxy.start())
    }

    /// `seconds` of seeded stereo pink noise at 48 kHz in `path`: unique in every window, so
    /// waveform matching pins each room to a fraction of a sample.
    func pinkNoise(_ path: String, seconds: Int, seed: Int) throws {
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(seconds):c=pink:a=0.3:seed=\(seed)", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", path])
    }

    /// Waits (guarded) until every room has played a track of `seconds` to its end, or is idle.
    func waitForTheEnd(of seconds: Double, port: Int, timeout: Double = 20) async throws {
        try await waitForRooms(port, timeout: timeout) { rooms in rooms.values.allSatisfy { ($0.playheadSeconds ?? 0) > seconds - 0.05 || $0.state == "idle" } }
    }

    /// What each room's virtual sound card emitted, for `SyncAnalysis`.
    func captures(in directory: TemporaryDirectory, rooms: [RoomSpec]) throws -> [SyncAnalysis.Room] {
        try rooms.map { room in
            SyncAnalysis.Room(name: room.name, capture: try VirtualCapture(path: directory.file("\(room.name).wav")),
                              latencyNanoseconds: Double(room.latency)! * 1e6)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func threeRoomsPlayInSyncJoinLeaveAndDie() async throws {
        let directory = try TemporaryDirectory("multiroom")
        defer { directory.preserveLogs(as: "multiroom-sync"); directory.remove() }
        let music = directory.file("music.flac")
        // Music-like: chords with vibrato plus noise, at 44.1 kHz so the server resamples. The
        // noise is seeded, so that a failing run's captures can be analysed again.
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=220:d=10", "-f", "lavfi", "-i", "sine=f=331:d=10", "-f", "lavfi", "-i", "anoisesrc=d=10:c=pink:a=0.15:seed=21",
                              "-filter_complex", "[0]vibrato=f=5[x];[x][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=0.8*c0,aresample=44100", music])
        let rooms = [RoomSpec(name: "a", offset: "300", drift: "50", device: "-30", latency: "0"),
                     RoomSpec(name: "b", offset: "-700", drift: "-80", device: "60", latency: "20"),
                     RoomSpec(name: "c", offset: "45", drift: "10", device: "-90", latency: "0")]
        let (server, port, speakers) = try await startHouse(in: directory, rooms: rooms)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        let commandTime = MonotonicClock().now()
        let reply = try await send(.play(files: [music], rooms: ["a", "b"]), port: port)
        #expect(reply.started?.rooms == ["a", "b"])
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        try await Task.sleep(nanoseconds: 2_500_000_000)
        _ = try await send(.join(room: "c"), port: port)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let volume = try await send(.volume(room: "a", percent: 50), port: port)
        #expect(volume.room?.volume == 50)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        _ = try await send(.leave(room: "b"), port: port)
        let status = try await send(.status, port: port)
        #expect(status.status?.state == "playing")
        // c dies (SIGKILL: no goodbye); the house notices and nobody else does.
        try await Task.sleep(nanoseconds: 1_500_000_000)
        speakers[2].process.send(SIGKILL)
        try await waitForRooms(port) { $0["c"] == nil }
        // Until the end of the track.
        try await waitForRooms(port, timeout: 20) { rooms in (rooms["a"]?.playheadSeconds ?? 0) > 9.9 || rooms["a"]?.state == "idle" }
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers.prefix(2) { #expect(speaker.interrupt() == 0) }

        // What the sound cards emitted.
        let reader = GaplessQueueReader(paths: [music], outputRate: 48000, channelCount: 2)
        var reference: [Float] = []
        var block: [Float] = []
        while reader.read(into: &block) > 0 { reference += block }
        let analysis = SyncAnalysis.analyse(rooms: try captures(in: directory, rooms: rooms), reference: reference)
        let p99 = analysis.percentile(99) / 1000, p50 = analysis.percentile(50) / 1000
        print("multi-room e2e: skew p50 \(p50) µs, p99 \(p99) µs, max \(analysis.maximum / 1000) µs over \(analysis.skews.count) checkpoints; rooms heard per checkpoint \(analysis.roomsPerCheckpoint)")
        #expect(analysis.skews.count > 20)
        #expect(p99 < 250, "p99 inter-room skew \(p99) µs")
        for room in ["a", "b", "c"] {
            #expect(analysis.underruns[room] == 0, "\(room) underran")
            #expect(analysis.discontinuities[room] == 0, "\(room) jumped: \(analysis.jumps.prefix(3)), checkpoints \(analysis.roomsPerCheckpoint)")
        }
        // Volume: a went from full to 50 % (−30 dB) smoothly; the others kept theirs.
        let aGains = analysis.gains.compactMap { $0.gain["a"] }
        #expect(abs(aGains.first! - 1) < 0.02 && abs(aGains.last! - 0.0316) < 0.002, "a's gain went \(aGains.first!) → \(aGains.last!)")
        #expect(analysis.gains.compactMap { $0.gain["c"] }.allSatisfy { abs($0 - 1) < 0.02 })
        // a played everything; c joined (~2.6 s in), b left (~5.7 s in), c died (~7.2 s in).
        #expect(analysis.unmatched["a"] == 0)
        let checkpoints = analysis.roomsPerCheckpoint
        #expect(checkpoints.first == 2 && checkpoints.contains(3) && checkpoints.last == 1)
        // Start: the first frame heard ~170 ms after the command in a release build (the anchor
        // 50 ms beyond the rooms' 95 ms output lead, b's 20 ms latency, and the first audio's
        // production, which a debug build under load has taken over 100 ms).
        let start = try #require(analysis.startTimes["a"])
        let latency = (start - Double(commandTime)) / 1e6
        #expect(latency > 50 && latency < 400, "start latency \(latency) ms")
        #expect(abs(analysis.startTimes["a"]! - analysis.startTimes["b"]!) < 250_000)
        // Each room's clock estimate against the truth, which its simulated clock offset and
        // drift let it know (`--clock-truth`): within half a millisecond (debug builds on a
        // shared loopback put it up to tens of microseconds off, release builds some 20 µs),
        // and within the bound the room reported, which must hold whatever the two processes'
        // time stamping does (the kernel stamps arrivals; the bound allows for the rest).
        let truth = try ClockTruth(files: Dictionary(uniqueKeysWithValues: rooms.map { ($0.name, directory.file("\($0.name).truth.jsonl")) }))
            .summary(over: commandTime...MonotonicClock().now())
        print("multi-room e2e: clock estimates' true error spread p99 \(truth.percentile(99) / 1000) µs; per room p99 |error| µs \(truth.worstErrors.mapValues { ($0 / 100).rounded() / 10 }), bound covered \(truth.coverage)")
        #expect(truth.skews.count > 50)
        for room in ["a", "b"] {
            #expect((truth.worstErrors[room] ?? .infinity) < 500_000, "\(room)'s clock estimate was \((truth.worstErrors[room] ?? .nan) / 1000) µs off the truth")
        }
        for room in ["a", "b", "c"] {
            #expect((truth.coverage[room] ?? 0) >= 0.99, "\(room)'s bound covered its true error in \((truth.coverage[room] ?? 0) * 100) % of samples")
        }
    }

    /// Seek and next in a playing house, with real speakers: both rooms stay sample-aligned
    /// through each cut and play the edited timeline the replies describe (the cut frames they
    /// name), with nothing lost or repeated around the cuts.
    @Test(.timeLimit(.minutes(3)))
    func seekAndNextCutEveryRoomInSync() async throws {
        let directory = try TemporaryDirectory("multiroom-edit")
        defer { directory.preserveLogs(as: "multiroom-edit"); directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        // Two different noise-and-tone signals, at the stream's rate: every window is unique.
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=6:c=brown:a=0.2:seed=1", "-f", "lavfi", "-i", "sine=f=110:d=6",
                              "-filter_complex", "amix=inputs=2,pan=stereo|c0=c0|c1=0.7*c0,aresample=48000", a])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=3:c=brown:a=0.2:seed=2", "-f", "lavfi", "-i", "sine=f=165:d=3",
                              "-filter_complex", "amix=inputs=2,pan=stereo|c0=0.6*c0|c1=c0,aresample=48000", b])
        let rooms = [RoomSpec(name: "a", offset: "250", drift: "40", device: "-50", latency: "0"),
                     RoomSpec(name: "b", offset: "-600", drift: "-70", device: "80", latency: "20")]
        let (server, port, speakers) = try await startHouse(in: directory, rooms: rooms)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        _ = try await send(.play(files: [a, b]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        try await Task.sleep(nanoseconds: 1_200_000_000)
        let seek = try await send(.seek(seconds: 4.0), port: port)
        let seekFrame = Int(((seek.edited?.cut?.fromSeconds ?? 0) * 48000).rounded())
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let next = try await send(.next, port: port)
        let nextFrame = Int(((next.edited?.cut?.fromSeconds ?? 0) * 48000).rounded())
        #expect(next.edited?.item == 1)
        #expect(seekFrame > 48000 && nextFrame > seekFrame + 24000, "cuts at \(seekFrame), \(nextFrame)")
        // Until b has played out.
        let end = Double(nextFrame) / 48000 + 3
        try await waitForRooms(port, timeout: 20) { rooms in
            rooms.values.allSatisfy { ($0.playheadSeconds ?? 0) > end - 0.05 || $0.state == "idle" }
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        // The edited timeline: a up to the seek's cut, a from 4 s up to the skip's cut, then b.
        let decodedA = try TestMedia.decodeWithFFmpeg(a), decodedB = try TestMedia.decodeWithFFmpeg(b)
        let resumed = 4 * 48000
        let reference = Array(decodedA[0..<(seekFrame * 2)]) + Array(decodedA[(resumed * 2)..<((resumed + nextFrame - seekFrame) * 2)]) + decodedB
        let captures = try captures(in: directory, rooms: rooms)
        let analysis = SyncAnalysis.analyse(rooms: captures, reference: reference, interval: 6000)
        let p99 = analysis.percentile(99) / 1000
        print("multi-room edits: cuts at \(seekFrame) and \(nextFrame); skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(p99) µs over \(analysis.skews.count) checkpoints")
        #expect(analysis.skews.count > 10)
        #expect(p99 < 250, "p99 inter-room skew \(p99) µs")
        for room in ["a", "b"] {
            #expect(analysis.underruns[room] == 0, "\(room) underran")
            #expect(analysis.discontinuities[room] == 0, "\(room) jumped: \(analysis.jumps)")
            #expect(analysis.unmatched[room] == 0, "\(room) did not play the edited timeline")
        }
        // Across each cut, the 512 frames around it match the edited timeline in both rooms: no
        // room played audio of the old timeline past the cut (a room that had committed it
        // would hold a 240-frame block or more of it there) or cut early.
        let seekOnly = Array(decodedA[0..<(seekFrame * 2)]) + Array(decodedA[(resumed * 2)...])
        for (cut, old) in [(seekFrame, decodedA), (nextFrame, seekOnly)] {
            let half = 256
            for capture in captures {
                // The room's lag (device frame − timeline frame) at the last checkpoint before the cut.
                guard let before = analysis.series.last(where: { $0.frame < cut && $0.heard[capture.name] != nil }),
                      let heard = before.heard[capture.name] else {
                    Issue.record("\(capture.name) was not heard before the cut at \(cut)")
                    continue
                }
                let lag = Int((capture.capture.frame(atEmissionTime: heard - capture.latencyNanoseconds) - Double(before.frame)).rounded())
                func window(_ range: Range<Int>, switchingAt frame: Int) -> [Float] {
                    range.flatMap { t -> [Float] in
                        let source = t < frame ? old : reference
                        return [source[2 * t], source[2 * t + 1]]
                    }
                }
                guard let fit = SyncAnalysis.locate(0, in: capture.capture, reference: window((cut - half)..<(cut + half), switchingAt: cut),
                                                    guess: lag + cut - half, search: 8, window: 2 * half) else {
                    Issue.record("\(capture.name) does not play the edited timeline around the cut at \(cut)")
                    continue
                }
                print("multi-room edits: \(capture.name) across the cut at \(cut): relative residual \(fit.residual)")
                #expect(fit.residual < 0.02, "\(capture.name) around the cut at \(cut): relative residual \(fit.residual)")
            }
        }
    }

    /// `play` one second after the speakers start, before their clocks have the second of
    /// history they play by: the house waits for them (at most 1.5 s), so every room plays both
    /// items from their first frame, in sync; room b reaches the house through a home network
    /// (`homeNetwork`). Before, every room joined about 1.9 s into the track and the beginning
    /// was heard nowhere; and until the house scheduled the start beyond the rooms' output lead
    /// (`Hello.outputLeadNanoseconds`), a loaded machine had rooms begin 5–45 ms into it.
    @Test(.timeLimit(.minutes(3)))
    func playRightAfterTheSpeakersStartLosesNoBeginning() async throws {
        let directory = try TemporaryDirectory("multiroom-first-play")
        defer { directory.preserveLogs(as: "multiroom-first-play"); directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        // Brown noise: unique in every window and smooth enough that a fraction of a sample of
        // misalignment (drift, the resampler's phase) leaves a small residual.
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=3:c=brown:a=0.3:seed=3", "-af", "pan=stereo|c0=c0|c1=0.7*c0,aresample=48000", a])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=brown:a=0.3:seed=4", "-af", "pan=stereo|c0=0.6*c0|c1=c0,aresample=48000", b])
        let rooms = [RoomSpec(name: "a", offset: "400", drift: "60", device: "-40", latency: "0"),
                     RoomSpec(name: "b", offset: "-500", drift: "-30", device: "70", latency: "0")]
        let (server, port) = try startServer(in: directory)
        let (proxy, proxyPort) = try await startProxy(to: port)
        var speakers: [ChildProcess] = []
        let started = ContinuousClock.now
        for room in rooms { speakers.append(try startSpeaker(room, port: room.name == "b" ? proxyPort : port, in: directory)) }
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        try await waitForRooms(port) { $0.count == rooms.count }
        // The scenario, not a synchronisation: the user presses play one second after starting
        // the speakers, before their clocks have a second of history.
        try await Task.sleep(until: started + .seconds(1))
        let reply = try await send(.play(files: [a, b]), port: port)
        let report = try #require(reply.started)
        print("first play: waited \(report.waitedMs ?? -1) ms, starts in \(report.startsInMs) ms, not ready \((report.notReady ?? []).map { "\($0.room): \($0.reason)" })")
        #expect(report.rooms == ["a", "b"])
        #expect(report.notReady == nil, "\(report)")
        #expect((report.waitedMs ?? 0) > 0 && (report.waitedMs ?? 0) <= 1500, "\(report)")
        #expect(report.startsInMs <= 150, "\(report)")
        try await waitForRooms(port) { rooms in rooms.values.allSatisfy { $0.state == "playing" } }
        try await waitForTheEnd(of: 5, port: port)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        let reference = try TestMedia.decodeWithFFmpeg(a) + TestMedia.decodeWithFFmpeg(b)
        let captures = try captures(in: directory, rooms: rooms)
        let analysis = SyncAnalysis.analyse(rooms: captures, reference: reference, interval: 6000)
        print("first play: skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs over \(analysis.skews.count) checkpoints")
        // These rooms play by clock estimates a second old, whose rates may still be off by
        // tens of ppm (p99 170-243 µs here at 100 exchanges a second; 27.7 µs at about 290 a second in
        // the first 3 s, issue 33); the sync target holds after 10 s of history and is measured
        // by `tutti-bench sweep`. This test is about no beginning being lost.
        #expect(analysis.percentile(99) / 1000 < 400)
        for capture in captures {
            #expect(analysis.underruns[capture.name] == 0, "\(capture.name) underran")
            #expect(analysis.discontinuities[capture.name] == 0, "\(capture.name) jumped")
            #expect(analysis.unmatched[capture.name] == 0, "\(capture.name) did not play both items through")
            // The first sound the room made is timeline frame 0: the first 1024 frames of item a.
            // (A room logs "playing stream … from timeline frame 170": the position at the end
            // of its first 240-frame block, which began with 70 frames of silence.)
            // Brown noise starts near zero, so the first sample over the silence threshold may
            // be a few dozen frames in: frame 0 is searched for up to 128 frames before it.
            let first = try #require(capture.capture.firstSoundFrame(), "\(capture.name) made no sound")
            // The room starts on a clock estimate a second old, its resampler steering by up to
            // a few hundred ppm at a fractional phase (more on a loaded machine): its first 1024
            // frames matched the reference with a relative residual of up to 0.031 in fresh-clone
            // CI runs, so the match allows 0.05. A room that began even 5 ms in does not match
            // frame 0 at all.
            let fit = SyncAnalysis.locate(0, in: capture.capture, reference: reference, guess: first - 64, search: 72, window: 1024)
            // (`locate` gives the capture frame minus the timeline frame: the same for both.)
            let later = fit.flatMap { SyncAnalysis.locate(6000, in: capture.capture, reference: reference, guess: Int($0.lag.rounded()), search: 8, window: 1024) }
            print("first play: \(capture.name) first sound at capture frame \(first); frame 0 \(fit.map { "at \($0.lag), residual \($0.residual)" } ?? "not found near it"); frame 6000 \(later.map { 6000 + $0.lag - fit!.lag } ?? .nan) frames after frame 0")
            #expect(fit.map { $0.residual < 0.05 } ?? false, "\(capture.name)'s first sound is not the first frame of the track: \(String(describing: fit))")
        }
        try await proxy.stop()
    }

    /// One room's connection to the house is reset mid-track (through a proxy, as a router
    /// restart would): the speaker reconnects by itself, says what it holds, and the house
    /// sends only what follows, so the room plays on with no gap, in sync with the other.
    @Test(.timeLimit(.minutes(3)))
    func aConnectionResetMidPlayIsSurvivedWithNoGap() async throws {
        let directory = try TemporaryDirectory("multiroom-reset")
        defer { directory.preserveLogs(as: "multiroom-reset"); directory.remove() }
        let music = directory.file("music.flac")
        try pinkNoise(music, seconds: 8, seed: 5)
        let rooms = [RoomSpec(name: "a", offset: "150", drift: "30", device: "-20", latency: "0"),
                     RoomSpec(name: "b", offset: "-350", drift: "-60", device: "40", latency: "0")]
        let (server, port) = try startServer(in: directory)
        let (proxy, proxyPort) = try await startProxy(to: port)
        let speakers = [try startSpeaker(rooms[0], port: port, in: directory), try startSpeaker(rooms[1], port: proxyPort, in: directory)]
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        try await waitForRooms(port) { reports in reports.count == 2 && reports.values.allSatisfy(\.hasSettledClock) }
        _ = try await send(.play(files: [music]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        // The scenario: two seconds in, the connection breaks.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let reset = await proxy.resetConnections()
        #expect(reset >= 2, "reset \(reset) channels")
        try await waitForTheEnd(of: 8, port: port)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        try await proxy.stop()

        let serverLog = (try? String(contentsOfFile: directory.file("server.log"), encoding: .utf8)) ?? ""
        let speakerLog = (try? String(contentsOfFile: directory.file("b.log"), encoding: .utf8)) ?? ""
        #expect(speakerLog.contains("connection to house 127.0.0.1:\(proxyPort) lost"), "\(speakerLog)")
        #expect(serverLog.contains("room b resumes stream"), "\(serverLog)")
        // Room b's packets cross the proxy's user-space relay, which runs on this test's own
        // threads: on a loaded machine it delays them unevenly each way, an asymmetry no two-way
        // clock sync can see (p99 was 64-267 µs). This test is about the reset leaving no gap.
        try expectWholeTrackInSync(music, rooms: rooms, in: directory, label: "connection reset", skewLimitMicroseconds: 400)
    }

    /// Mid-track, the route to one room changes on one way only (its path to the room gets
    /// 4 ms longer, through `NetworkModel.oneWayStep`'s relay): the rooms stay together. Two-way
    /// clock sync cannot tell that from the clocks moving 2 ms apart, and the room's estimate
    /// used to take it so once it saw the new floor (2 ms off, or a jump); monotonic clocks do
    /// not step, so the room now takes the step for asymmetry and its clock carries on.
    @Test(.timeLimit(.minutes(3)))
    func aOneWayRouteChangeMidTrackMovesNoRoom() async throws {
        let directory = try TemporaryDirectory("multiroom-route-change")
        defer { directory.preserveLogs(as: "multiroom-route-change"); directory.remove() }
        let music = directory.file("music.flac")
        try pinkNoise(music, seconds: 32, seed: 11)
        let rooms = [RoomSpec(name: "a", offset: "-240", drift: "35", device: "-25", latency: "0"),
                     RoomSpec(name: "b", offset: "610", drift: "-70", device: "55", latency: "0")]
        let (server, port) = try startServer(in: directory)
        // 1 ms each way with 0.5 ms of jitter; 20 s after the relay starts, the way to the room
        // gets 4 ms longer (the way back does not).
        var impairment = ImpairmentProxy.Impairment(delayNanoseconds: 1_000_000, seed: 12)
        impairment.network = NetworkModel.oneWayStep
        let (proxy, proxyPort) = try await startProxy(to: port, impairment: impairment)
        let proxyStarted = MonotonicClock().now()
        let speakers = [try startSpeaker(rooms[0], port: port, in: directory), try startSpeaker(rooms[1], port: proxyPort, in: directory)]
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        try await waitForRooms(port) { reports in reports.count == 2 && reports.values.allSatisfy(\.hasSettledClock) }
        _ = try await send(.play(files: [music]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        try await waitForTheEnd(of: 32, port: port, timeout: 60)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        try await proxy.stop()

        let speakerLog = (try? String(contentsOfFile: directory.file("b.log"), encoding: .utf8)) ?? ""
        let change = speakerLog.split(separator: "\n").first { $0.contains("the path to the house changed") }
        print("route change: \(change ?? "no path change logged")")
        #expect(change != nil, "room b did not see the route change: \(speakerLog)")
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let captures = try captures(in: directory, rooms: rooms)
        let analysis = SyncAnalysis.analyse(rooms: captures, reference: reference, interval: 6000)
        // Where the track was when the step could first be seen (the room sees a new floor after
        // 5 s of it): from there on, the rooms would have been 2 ms apart.
        let stepSeen = Double(proxyStarted + 25_000_000_000)
        // (`series` gives each checkpoint's emission time, on the monotonic clock, in each room.)
        let afterStep = analysis.series.filter { checkpoint in checkpoint.heard.count == 2 && checkpoint.heard["a"]! > stepSeen }
        let lateSkews = afterStep.map { checkpoint in abs(checkpoint.heard["a"]! - checkpoint.heard["b"]!) }.sorted()
        print("route change: skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs over \(analysis.skews.count) checkpoints; after the step was seen, max \((lateSkews.last ?? .nan) / 1000) µs over \(lateSkews.count)")
        #expect(lateSkews.count > 20, "too little of the track was heard after the step")
        // The proxy's relay runs on this test's threads (see aConnectionResetMidPlayIsSurvivedWithNoGap).
        #expect((lateSkews.last ?? .infinity) / 1000 < 400)
        try expectWholeTrackInSync(music, rooms: rooms, in: directory, label: "one-way route change", skewLimitMicroseconds: 400)
        let truth = try ClockTruth(files: ["b": directory.file("b.truth.jsonl")]).summary(over: proxyStarted...MonotonicClock().now())
        #expect((truth.coverage["b"] ?? 0) >= 0.99, "b's bound covered its true error in \((truth.coverage["b"] ?? 0) * 100) % of samples")
    }

    /// Play is pressed the moment the rooms are listed (no clock history), one room behind a
    /// jittery home network (0–2 ms each way, `NetworkModel.uniform`); 8 s in, that room's link
    /// goes down for 12 s. The room plays on from its buffer on the rate it fitted in its first
    /// seconds, and comes back in sync: everything heard, nothing jumped, the rooms together
    /// from the first frame to the last. (Before issue 33 such a room's rate was still ~100 ppm
    /// off at 8 s; it drifted 1.46 ms in the outage and slewed back at 500 ppm.)
    @Test(.timeLimit(.minutes(3)))
    func aColdStartUnderJitterThenATwelveSecondOutageStaysInSync() async throws {
        let directory = try TemporaryDirectory("multiroom-cold-outage")
        defer { directory.preserveLogs(as: "multiroom-cold-outage"); directory.remove() }
        let music = directory.file("music.flac")
        try pinkNoise(music, seconds: 30, seed: 13)
        let rooms = [RoomSpec(name: "a", offset: "320", drift: "-55", device: "30", latency: "0"),
                     RoomSpec(name: "b", offset: "-710", drift: "83", device: "-60", latency: "0")]
        let (server, port) = try startServer(in: directory)
        var impairment = ImpairmentProxy.Impairment(delayNanoseconds: 1_000_000, seed: 14)
        impairment.network = NetworkModel.uniform
        let (proxy, proxyPort) = try await startProxy(to: port, impairment: impairment)
        let speakers = [try startSpeaker(rooms[0], port: port, in: directory), try startSpeaker(rooms[1], port: proxyPort, in: directory)]
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        // The scenario, not a synchronisation: play as soon as both rooms are listed.
        try await waitForRooms(port) { $0.count == 2 }
        let reply = try await send(.play(files: [music]), port: port)
        let report = try #require(reply.started)
        print("cold start: waited \(report.waitedMs ?? -1) ms, starts in \(report.startsInMs) ms, not ready \((report.notReady ?? []).map { "\($0.room): \($0.reason)" })")
        #expect(report.rooms == ["a", "b"] && report.notReady == nil, "\(report)")
        // Each room's start is reported with the bound it started on: both play at once.
        print("cold start: \((report.roomStarts ?? []).map { "\($0.room) \($0.mode.rawValue) ±\($0.clockBoundMicroseconds ?? -1) µs" })")
        #expect(report.roomStarts?.map(\.room) == ["a", "b"] && report.roomStarts?.allSatisfy { $0.mode != .later && $0.clockBoundMicroseconds != nil } == true,
                "\(report)")
        proxy.scheduleOutage(after: .seconds(8), duration: .seconds(12))
        try await waitForTheEnd(of: 30, port: port, timeout: 60)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        try await proxy.stop()
        #expect(proxy.statistics.toUpstream.udpDatagramsDroppedByOutage > 0, "the outage dropped nothing: \(proxy.statistics)")
        // The proxy's relay runs on this test's threads (see aConnectionResetMidPlayIsSurvivedWithNoGap),
        // and a loaded machine may slow the room's first exchanges (a house that holds replies
        // late makes it back off). Nine runs on an idle machine (2026-11-27): p99 133–869 µs,
        // and CI's of 2026-11-28 1054 µs. The tail was not the outage (b's clock held within
        // 30 µs through it) but its end: the first exchanges after it, a few, sat 0.3–1 ms above
        // the floor, and the fit's chord across the gap moved b's clock 0.9 ms off, back 2 s
        // later. The estimator now keeps the rate for 3 s after an outage
        // (`ClockEstimator.Configuration.rateSpanAfterGapNanoseconds`): eight runs, p99 85–189 µs.
        // What is left is the cold start's own rate, 3–5 ppm off after 8 s (issue 33's target
        // is 100 µs); the limit leaves room for a loaded machine, not for the jump.
        try expectWholeTrackInSync(music, rooms: rooms, in: directory, label: "cold start and outage", skewLimitMicroseconds: 400)
        let truth = try ClockTruth(files: ["b": directory.file("b.truth.jsonl")]).summary(over: Int64.min...Int64.max)
        print("cold start and outage: b's clock error p99 \((truth.worstErrors["b"] ?? .nan) / 1000) µs, bound covered \((truth.coverage["b"] ?? 0) * 100) %")
        #expect((truth.coverage["b"] ?? 0) >= 0.99, "b's bound covered its true error in \((truth.coverage["b"] ?? 0) * 100) % of samples")
    }

    /// Every room played the whole of `music`, without an underrun or a jump, in sync.
    func expectWholeTrackInSync(_ music: String, rooms: [RoomSpec], in directory: TemporaryDirectory, label: String,
                                skewLimitMicroseconds: Double = 250) throws {
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: try captures(in: directory, rooms: rooms), reference: reference, interval: 6000)
        print("\(label): skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs over \(analysis.skews.count) checkpoints")
        #expect(analysis.percentile(99) / 1000 < skewLimitMicroseconds)
        for room in rooms.map(\.name) {
            #expect(analysis.underruns[room] == 0, "\(room) underran")
            #expect(analysis.discontinuities[room] == 0, "\(room) jumped: \(analysis.jumps)")
            #expect(analysis.unmatched[room] == 0, "\(room) did not play the whole track")
        }
    }

    /// A speaker is killed (-9) mid-track and started again with the same name, as after a
    /// crash or a reboot of its host: it holds nothing, so the house sends it the stream from
    /// a little after the playhead, and it plays in sync within two seconds of starting.
    @Test(.timeLimit(.minutes(3)))
    func aSpeakerKilledAndRestartedPlaysInSyncWithinTwoSeconds() async throws {
        let directory = try TemporaryDirectory("multiroom-speaker-restart")
        defer { directory.preserveLogs(as: "multiroom-speaker-restart"); directory.remove() }
        let music = directory.file("music.flac")
        try pinkNoise(music, seconds: 10, seed: 7)
        let rooms = [RoomSpec(name: "a", offset: "-180", drift: "25", device: "45", latency: "0"),
                     RoomSpec(name: "b", offset: "380", drift: "-45", device: "-20", latency: "0")]
        // Room b, the one restarted, reaches the house through a home network.
        let (server, port, speakers, proxy) = try await startHouse(in: directory, rooms: rooms, proxying: "b")
        var again: ChildProcess?
        defer {
            for speaker in speakers { speaker.interrupt() }
            again?.interrupt()
            server.interrupt()
        }
        _ = try await send(.play(files: [music]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        // The scenario: two seconds in, b's process dies, and its service manager starts it again.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        speakers[1].kill()
        let restartTime = Double(MonotonicClock().now())
        again = try startSpeaker(rooms[1], port: proxy!.port, in: directory, output: "b-again")
        try await waitForTheEnd(of: 10, port: port)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(speakers[0].interrupt() == 0)
        #expect(again?.interrupt() == 0)
        try await proxy?.proxy.stop()

        let restarted = try VirtualCapture(path: directory.file("b-again.wav"))
        let firstSound = try #require(restarted.firstSoundFrame(), "the restarted room made no sound")
        let startedAfter = (restarted.emissionTime(ofFrame: Double(firstSound)) - restartTime) / 1e9
        print("speaker restart: first sound \(String(format: "%.3f", startedAfter)) s after the process started")
        #expect(startedAfter < 2, "the restarted room played \(startedAfter) s after starting")
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: try VirtualCapture(path: directory.file("a.wav")), latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "b", capture: restarted, latencyNanoseconds: 0)],
                                            reference: reference, interval: 6000)
        let together = analysis.series.filter { $0.heard.count == 2 }
        let heardFrom = try #require(together.first?.frame)
        print("speaker restart: together from timeline \(Double(heardFrom) / 48000) s; skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs over \(analysis.skews.count) checkpoints")
        // From its first checkpoint on, the restarted room heard every one, in sync.
        #expect(analysis.series.filter { $0.frame >= heardFrom }.allSatisfy { $0.heard.count == 2 })
        #expect(together.count > 40)
        // The proxy's relay runs on this test's threads (see aConnectionResetMidPlayIsSurvivedWithNoGap).
        #expect(analysis.percentile(99) / 1000 < 400)
        #expect(analysis.discontinuities["b"] == 0, "b jumped: \(analysis.jumps)")
        #expect(analysis.underruns["a"] == 0 && analysis.discontinuities["a"] == 0 && analysis.unmatched["a"] == 0)
    }

    /// A process's resident memory now and at its peak, in MiB (/proc/PID/status).
    static func memory(of pid: Int32) -> (current: Double, peak: Double) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return .nan }
            return (Double(line.split(separator: " ").dropFirst().first { !$0.isEmpty }.map(String.init) ?? "") ?? .nan) / 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// While two rooms play, the house faces a thousand idle connections, twenty slow-drip
    /// ones, random bytes to its TCP port and a flood of UDP garbage at its clock-sync port. It
    /// keeps serving its rooms (no underrun, no jump, every checkpoint heard), answers
    /// commands, its memory stays bounded, and its log stays short.
    @Test(.timeLimit(.minutes(10)))
    func theHouseServesItsRoomsThroughHostileClients() async throws {
        let directory = try TemporaryDirectory("multiroom-hostile")
        defer { directory.preserveLogs(as: "multiroom-hostile"); directory.remove() }
        let music = directory.file("music.flac")
        // The 1 GiB run (TUTTI_HOSTILE_MIB=1024) floods for about 370 s: the track outlasts it.
        let seconds = ProcessInfo.processInfo.environment["TUTTI_HOSTILE_MIB"] == nil ? 20 : 600
        try pinkNoise(music, seconds: seconds, seed: 8)
        let rooms = [RoomSpec(name: "a", offset: "90", drift: "-35", device: "15", latency: "0"),
                     RoomSpec(name: "b", offset: "-260", drift: "55", device: "-40", latency: "0")]
        let (server, port, speakers) = try await startHouse(in: directory, rooms: rooms)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        _ = try await send(.play(files: [music]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        let before = Self.memory(of: server.process.processIdentifier)
        var plan = HostileClients.Plan()
        // CI sends 32 MiB and 16 MiB; TUTTI_HOSTILE_MIB=1024 sends the issue's gibibyte to each port.
        let mebibytes = ProcessInfo.processInfo.environment["TUTTI_HOSTILE_MIB"].flatMap(Int64.init)
        plan.randomTCPBytes = (mebibytes ?? 32) << 20
        plan.randomUDPBytes = (mebibytes ?? 16) << 20
        plan.parallelWriters = 4
        let outcome = try await HostileClients.run(host: "127.0.0.1", port: port, plan: plan)
        let status = try #require(try await send(.status, port: port).status)
        let after = Self.memory(of: server.process.processIdentifier)
        print("hostile clients: \(outcome); house RSS \(Int(before.current)) MiB before, peak \(Int(after.peak)) MiB, \(Int(after.current)) MiB after")
        #expect(outcome.idleConnectionsOpened == plan.idleConnections && outcome.slowDripConnectionsOpened == plan.slowDripConnections)
        #expect(outcome.tcpBytesSent >= plan.randomTCPBytes && outcome.udpBytesSent >= plan.randomUDPBytes)
        #expect(status.state == "playing" && status.rooms.count == 2)
        #expect(after.peak - before.current < 128, "the house grew from \(before.current) MiB to a peak of \(after.peak) MiB")
        try await waitForTheEnd(of: Double(seconds), port: port, timeout: Double(seconds) + 10)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        let log = (try? String(contentsOfFile: directory.file("server.log"), encoding: .utf8)) ?? ""
        #expect(log.split(separator: "\n").count < 60, "\(log.split(separator: "\n").count) log lines")
        #expect(log.contains("more connections closed for bad input"), "\(log)")
        try expectWholeTrackInSync(music, rooms: rooms, in: directory, label: "hostile clients")
    }

    /// The house is killed (-9) three seconds into a ten-second track and started again on the
    /// same port and state directory. The rooms hold the whole track, so they play on through
    /// the outage; they reconnect by themselves, the restarted house takes up the same stream
    /// and timeline from its store, and what it reports is what they play. Checked on what the
    /// sound cards emitted: no gap, no jump, in sync.
    @Test(.timeLimit(.minutes(3)))
    func theHouseKilledMidTrackIsRestartedWithNoGap() async throws {
        let directory = try TemporaryDirectory("multiroom-house-restart")
        defer { directory.preserveLogs(as: "multiroom-house-restart"); directory.remove() }
        let music = directory.file("music.flac")
        try pinkNoise(music, seconds: 10, seed: 6)
        let rooms = [RoomSpec(name: "a", offset: "250", drift: "40", device: "-25", latency: "0"),
                     RoomSpec(name: "b", offset: "-420", drift: "-50", device: "35", latency: "0")]
        // Room b reaches the house through a home network (the proxy stays up while the house
        // is down, and refuses b's reconnections until it is back).
        let (server, port, speakers, proxy) = try await startHouse(in: directory, rooms: rooms, proxying: "b")
        var restarted: ChildProcess?
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
            restarted?.interrupt()
        }
        let started = try #require(try await send(.play(files: [music]), port: port).started)
        try await waitForRooms(port) { rooms in rooms.values.allSatisfy { $0.state == "playing" && ($0.bufferSeconds ?? 0) > 6 } }
        let before = try #require(try await send(.status, port: port).status)
        // The scenario: three seconds in, the house dies.
        try await Task.sleep(nanoseconds: 3_000_000_000 - UInt64(max(0, started.startsInMs)) * 1_000_000)
        server.kill()
        restarted = try startServer(in: directory, port: port).server
        try await waitForRooms(port) { rooms in rooms.count == 2 && rooms.values.allSatisfy { $0.state == "playing" } }
        let after = try #require(try await send(.status, port: port).status)
        #expect(after.stream == before.stream)
        #expect(after.state == "playing")
        #expect(after.item == 0)
        for room in after.rooms {
            // The rooms' playheads, reported a moment earlier, are what the house says is heard.
            let playhead = try #require(room.playheadSeconds)
            #expect(abs(playhead - (after.positionSeconds ?? -1)) < 0.3, "\(room.name) plays \(playhead) s, the house says \(String(describing: after.positionSeconds)) s")
            #expect(abs((after.itemPositionSeconds ?? -1) - (after.positionSeconds ?? -2)) < 1e-6)
        }
        try await waitForTheEnd(of: 10, port: port)
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        try await proxy?.proxy.stop()

        let logs = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("server-") }
            .map { (try? String(contentsOfFile: directory.file($0), encoding: .utf8)) ?? "" }.joined()
        #expect(logs.contains("resuming stream \(before.stream ?? 0), heard at timeline frame"), "\(logs)")
        for room in rooms {
            let log = (try? String(contentsOfFile: directory.file("\(room.name).log"), encoding: .utf8)) ?? ""
            #expect(log.contains("connection to house 127.0.0.1:\(room.name == "b" ? proxy!.port : port) lost"), "\(log)")
        }
        try expectWholeTrackInSync(music, rooms: rooms, in: directory, label: "house restart", skewLimitMicroseconds: 400)
    }

    /// The house is killed (-9) in the middle of a burst of queue edits from a client: the
    /// restarted house's queue is a prefix of the edits, holding at least every edit that was
    /// answered.
    @Test(.timeLimit(.minutes(3)))
    func theHouseKilledDuringQueueEditsReopensWithAPrefixOfThem() async throws {
        let directory = try TemporaryDirectory("multiroom-edit-burst")
        defer { directory.preserveLogs(as: "multiroom-edit-burst"); directory.remove() }
        let tone = directory.file("tone.flac")
        try TestMedia.generateTone(tone, seconds: 0.5)
        let files = (0..<400).map { directory.file("item-\($0).flac") }
        for file in files { try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: tone) }
        let (server, port) = try startServer(in: directory)
        var restarted: ChildProcess?
        defer {
            server.interrupt()
            restarted?.interrupt()
        }
        let answered = Counter()
        // Edits, one after another as fast as the house answers them, while a second task kills
        // the house once a hundred have been answered.
        let editor = Task {
            for (index, file) in files.enumerated() {
                guard (try? await send(.queueAdd(file: file, at: index % 3 == 2 ? 0 : nil), port: port)) != nil else { return }
                answered.increment()
            }
        }
        let deadline = Date().addingTimeInterval(30)
        while answered.value < 100 && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        server.kill()
        await editor.value
        let acknowledged = answered.value
        restarted = try startServer(in: directory, port: port).server
        let queue = try #require(try await send(.queue, port: port).queue).items.map(\.path)
        // The queue after each prefix of the edits.
        var expected: [[String]] = [[]]
        var current: [String] = []
        for (index, file) in files.enumerated() {
            if index % 3 == 2 { current.insert(file, at: 0) } else { current.append(file) }
            expected.append(current)
        }
        print("edit burst: \(acknowledged) edits answered before the kill, \(queue.count) kept")
        #expect(acknowledged >= 100 && acknowledged < files.count, "killed after \(acknowledged) edits")
        #expect(queue.count >= acknowledged && queue.count <= acknowledged + 1)
        #expect(expected.indices.contains(queue.count) && expected[queue.count] == queue, "the queue is not a prefix of the edits")
    }
}

/// A count shared between test tasks.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}
