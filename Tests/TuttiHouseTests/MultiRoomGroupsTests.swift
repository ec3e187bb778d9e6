import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiEngine
import TuttiProtocol
import TuttiSimulation
@testable import TuttiDiagnostics
import TuttiTestSupport

/// Groups with real speaker processes, measured from their virtual sound cards: two groups play
/// different music at once, each in sync; a room moved from one to the other while both play
/// is heard playing the new group's music within a second, in sync with it, and never the old
/// group's again; the room it left plays on with no gap or jump; and volume and pause in one
/// group leave the other's card as it was.
extension MultiRoomEndToEndTests {
    func send(_ command: ControlCommand, group: String, port: Int) async throws -> ControlReply {
        try await ControlClient.send(ControlRequest(command, group: group), host: "127.0.0.1", port: port, token: try HouseTokens.token(port: port),
                                     group: MultiThreadedEventLoopGroup.singleton)
    }

    /// The file's audio as the house plays it: 48 kHz stereo, for `SyncAnalysis`.
    func reference(_ path: String) -> [Float] {
        let reader = GaplessQueueReader(paths: [path], outputRate: 48000, channelCount: 2)
        var samples: [Float] = [], block: [Float] = []
        while reader.read(into: &block) > 0 { samples += block }
        return samples
    }

    /// `seconds` of broadband music whose two tones and noise differ with `seed`, at 44.1 kHz.
    func groupMusic(_ path: String, seconds: Int, seed: Int) throws {
        let (low, high) = seed == 1 ? (220, 331) : (294, 415)
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=\(low):d=\(seconds)", "-f", "lavfi", "-i", "sine=f=\(high):d=\(seconds)",
                              "-f", "lavfi", "-i", "anoisesrc=d=\(seconds):c=pink:a=0.15:seed=\(seed)",
                              "-filter_complex", "[0]vibrato=f=\(4 + seed)[x];[x][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=0.8*c0,aresample=44100", path])
    }

    @Test(.timeLimit(.minutes(3)))
    func twoGroupsPlayTheirOwnMusicAndARoomMovesBetweenThem() async throws {
        let directory = try TemporaryDirectory("multiroom-groups")
        defer { directory.preserveLogs(as: "multiroom-groups"); directory.remove() }
        let albumPath = directory.file("album.flac"), radioPath = directory.file("radio.flac")
        try groupMusic(albumPath, seconds: 11, seed: 1)
        try groupMusic(radioPath, seconds: 14, seed: 2)
        let rooms = [RoomSpec(name: "a", offset: "300", drift: "50", device: "-30", latency: "0"),
                     RoomSpec(name: "b", offset: "-700", drift: "-80", device: "60", latency: "0"),
                     RoomSpec(name: "c", offset: "45", drift: "10", device: "-90", latency: "0")]
        let (server, port, speakers) = try await startHouse(in: directory, rooms: rooms)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        // The kitchen (c) goes to a group of its own, on the radio; a and b play the album.
        let created = try await send(.groupCreate(name: "Radio"), port: port)
        #expect(created.groups?.groups.map(\.name) == ["default", "Radio"])
        let moved = try await send(.join(room: "c"), group: "Radio", port: port)
        #expect(moved.room?.group == "Radio")
        let album = try await send(.play(files: [albumPath]), port: port)
        #expect(album.started?.rooms == ["a", "b"])
        let radio = try await send(.play(files: [radioPath]), group: "Radio", port: port)
        #expect(radio.started?.rooms == ["c"])
        func position(_ group: String) async throws -> Double {
            try await send(.status, group: group, port: port).status?.positionSeconds ?? 0
        }
        func waitFor(_ group: String, past seconds: Double) async throws {
            let deadline = Date().addingTimeInterval(30)
            while try await position(group) < seconds {
                guard Date() < deadline else { throw TestFailure("\(group) did not reach \(seconds) s") }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        try await waitFor("default", past: 3)
        // b moves to the radio while both play.
        let moveTime = MonotonicClock().now()
        let move = try await send(.join(room: "b"), group: "Radio", port: port)
        let moveReplied = MonotonicClock().now()
        #expect(move.room?.group == "Radio")
        let groups = try await send(.groups, port: port).groups
        #expect(groups?["default"]?.rooms == ["a"] && groups?["Radio"]?.rooms == ["b", "c"], "\(String(describing: groups))")
        // The radio's volume, then its pause: the album's room notices neither.
        try await waitFor("Radio", past: (try await position("Radio")) + 2)
        let volumeTime = MonotonicClock().now()
        #expect(try await send(.groupVolume(percent: 50), group: "Radio", port: port).group?.rooms.map(\.volume) == [50, 50])
        try await waitFor("Radio", past: (try await position("Radio")) + 1.5)
        let pauseTime = MonotonicClock().now()
        _ = try await send(.pause, group: "Radio", port: port)
        // Until the album ends.
        try await waitForRooms(port, timeout: 20) { rooms in (rooms["a"]?.playheadSeconds ?? 0) > 10.9 || rooms["a"]?.state == "idle" }
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        let captures = try captures(in: directory, rooms: rooms)
        let byName = Dictionary(uniqueKeysWithValues: captures.map { ($0.name, $0) })
        let albumHeard = SyncAnalysis.analyse(rooms: [byName["a"]!, byName["b"]!], reference: reference(albumPath))
        let radioHeard = SyncAnalysis.analyse(rooms: [byName["c"]!, byName["b"]!], reference: reference(radioPath))
        func heard(_ analysis: SyncAnalysis.Result, _ room: String) -> [(frame: Int, time: Double)] {
            analysis.series.compactMap { point in point.heard[room].map { (point.frame, $0) } }
        }
        // The album: a played all of it, with nothing lost or repeated, at full volume throughout
        // (the radio's volume and pause did not reach it); b, in sync with a until it moved.
        let albumSkew = albumHeard.percentile(99) / 1000
        print("groups: album skew p99 \(albumSkew) µs over \(albumHeard.skews.count) checkpoints; rooms per checkpoint \(albumHeard.roomsPerCheckpoint)")
        #expect(albumHeard.skews.count >= 8 && albumSkew <= 50, "the album's rooms were \(albumSkew) µs apart (p99)")
        #expect(albumHeard.discontinuities["a"] == 0 && albumHeard.underruns["a"] == 0 && albumHeard.unmatched["a"] == 0, "\(albumHeard.jumps)")
        let aGains = albumHeard.gains.compactMap { $0.gain["a"] }
        #expect(aGains.count > 30 && aGains.allSatisfy { abs($0 - 1) < 0.02 }, "a's gain \(aGains)")
        let bOnAlbum = heard(albumHeard, "b")
        let lastAlbum = try #require(bOnAlbum.last)
        print("groups: b last heard the album \(Double(Int64(lastAlbum.time) - moveTime) / 1e6) ms after the move")
        #expect(Int64(lastAlbum.time) < moveReplied + 250_000_000, "b played the album until \(Double(Int64(lastAlbum.time) - moveTime) / 1e6) ms after the move")
        // The radio: b joined c within a second of the move and played with it, in sync; the
        // volume took both to 50 % (−30 dB) and the pause silenced both.
        let bOnRadio = heard(radioHeard, "b")
        let firstRadio = try #require(bOnRadio.first)
        let joinedAfter = Double(Int64(firstRadio.time) - moveTime) / 1e6
        let radioSkew = radioHeard.percentile(99) / 1000
        print("groups: b first heard the radio \(joinedAfter) ms after the move; radio skew p99 \(radioSkew) µs over \(radioHeard.skews.count) checkpoints")
        #expect(joinedAfter > 0 && joinedAfter < 1000, "b joined the radio \(joinedAfter) ms after the move")
        #expect(radioHeard.skews.count >= 4 && radioSkew <= 50, "the radio's rooms were \(radioSkew) µs apart (p99)")
        #expect(radioHeard.discontinuities["c"] == 0 && radioHeard.underruns["c"] == 0, "\(radioHeard.jumps)")
        let afterVolume = radioHeard.series.indices.filter { radioHeard.series[$0].heard.values.contains { $0 > Double(volumeTime + 400_000_000) } }
        let levels = afterVolume.compactMap { radioHeard.gains[$0].gain["c"] }
        #expect(!levels.isEmpty && levels.allSatisfy { abs($0 - 0.0316) < 0.003 }, "c's gain after the volume: \(levels)")
        #expect(bOnRadio.allSatisfy { $0.time < Double(pauseTime + 600_000_000) }, "b played the radio after its pause")
        #expect(heard(radioHeard, "c").allSatisfy { $0.time < Double(pauseTime + 600_000_000) }, "c played the radio after its pause")
        #expect(heard(albumHeard, "a").contains { $0.time > Double(pauseTime + 1_000_000_000) }, "a stopped with the radio's pause")
    }
}

/// The same through MPD's partitions: python-mpd2 runs Tests/Python/mpd_partitions.py (the
/// flow a real MPD 0.23 is held to in MPDServerTests) against the house, and the cards show
/// each effect.
extension MultiRoomEndToEndTests {
    @Test(.timeLimit(.minutes(3)))
    func aRoomMovesBetweenMPDPartitions() async throws {
        let directory = try TemporaryDirectory("multiroom-partitions")
        defer { directory.preserveLogs(as: "multiroom-partitions"); directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        try groupMusic(music + "/album.flac", seconds: 30, seed: 1)
        try groupMusic(music + "/radio.flac", seconds: 30, seed: 2)
        let rooms = [RoomSpec(name: "a", offset: "300", drift: "50", device: "-30", latency: "0"),
                     RoomSpec(name: "b", offset: "-700", drift: "-80", device: "60", latency: "0")]
        let (server, port) = try startServer(in: directory, arguments: ["--mpd", "127.0.0.1:0", "--music", music])
        let mpdPort = Int(try server.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
        let speakers = try rooms.map { try startSpeaker($0, port: port, in: directory) }
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        try await waitForRooms(port) { reports in reports.count == rooms.count && reports.values.allSatisfy(\.hasSettledClock) }
        let flow = try await MPDPartitionFlow.run(address: "\(mpdPort)", song1: "album.flac", song2: "radio.flac", update: false,
                                                  log: directory.file("flow.log"))
        print("partitions: python-mpd2 against the house:\n\(flow.output)")
        #expect(flow.problems.isEmpty, "\(flow.problems)")
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        let byName = Dictionary(uniqueKeysWithValues: try captures(in: directory, rooms: rooms).map { ($0.name, $0) })
        let album = SyncAnalysis.analyse(rooms: [byName["a"]!, byName["b"]!], reference: reference(music + "/album.flac"))
        // b played the album before the radio: its analysis starts where it was moved.
        var bOnRadioCard = byName["b"]!
        bOnRadioCard.playsFrom = Double(try #require(flow.time("created")))
        let radio = SyncAnalysis.analyse(rooms: [bOnRadioCard], reference: reference(music + "/radio.flac"))
        func heard(_ analysis: SyncAnalysis.Result, _ room: String) -> [Double] {
            analysis.series.compactMap { $0.heard[room] }
        }
        let created = Double(try #require(flow.time("created"))), moved = Double(try #require(flow.time("moved", "before_ns")))
        let setvol = Double(try #require(flow.time("setvol"))), paused = Double(try #require(flow.time("radio-paused")))
        let resumed = Double(try #require(flow.time("radio-resumed"))), stopped = Double(try #require(flow.time("heard")))
        // a played the album throughout, at full volume, with nothing lost or repeated; b with it
        // until it moved, and again once it was moved back, in sync. (Until the flow's end: then
        // the speakers are stopped.)
        let during = album.series.indices.filter { index in album.series[index].heard.values.allSatisfy { $0 < stopped } && !album.series[index].heard.isEmpty }
        // The moved room is held to the group's sync from a second after its move (the issue's
        // "in sync within 1 s"); its first checkpoints after joining are printed apart.
        var skews: [Double] = [], joining: [String] = []
        for index in during {
            guard let a = album.series[index].heard["a"], let b = album.series[index].heard["b"] else { continue }
            if b > moved && b < moved + 1e9 {
                // Where b's card first sounded again before this checkpoint (a run of silence ends).
                let capture = byName["b"]!.capture
                var frame = Int(capture.frame(atEmissionTime: b)), quiet = 0
                while frame > 0 && quiet < 48 {
                    frame -= 1
                    quiet = abs(capture.samples[frame * capture.channelCount]) < 1e-6 ? quiet + 1 : 0
                }
                let onset = capture.emissionTime(ofFrame: Double(frame + quiet))
                joining.append("\(Int((b - moved) / 1e6)) ms after the move (\(Int((b - onset) / 1e6)) ms after b's card sounded again): \(Int(abs(a - b) / 1000)) µs")
            } else {
                skews.append(abs(a - b))
            }
        }
        skews.sort()
        let skew = nearestRankPercentile(skews, 99) / 1000
        print("partitions: album skew p99 \(skew) µs over \(skews.count) checkpoints with both rooms; b rejoining: \(joining.joined(separator: ", "))")
        #expect(skews.count >= 8 && skew <= 50, "the album's rooms were \(skew) µs apart (p99)")
        #expect(during.allSatisfy { album.series[$0].heard["a"] != nil }, "a missed album checkpoints before the flow's end")
        let aJumps = album.jumps.filter { jump in jump.room == "a" && (album.series.first { $0.frame == jump.frame }?.heard["a"] ?? 0) < stopped }
        #expect(aJumps.isEmpty, "a's album jumped: \(aJumps)")
        let aGains = during.compactMap { album.gains[$0].gain["a"] }
        #expect(aGains.count > 30 && aGains.allSatisfy { abs($0 - 1) < 0.02 }, "a's gain \(aGains)")
        let bAlbum = heard(album, "b"), bRadio = heard(radio, "b")
        #expect(!bAlbum.contains { $0 > created + 250e6 && $0 < moved }, "b played the album after it moved to the radio")
        #expect(!bRadio.contains { $0 > moved + 250e6 }, "b played the radio after it moved back")
        let joined = (bRadio.first ?? .infinity) - created, back = (bAlbum.first { $0 > moved } ?? .infinity) - moved
        print("partitions: b heard the radio \(joined / 1e6) ms after it was moved there, and the album again \(back / 1e6) ms after it was moved back")
        #expect(joined > 0 && joined < 1e9 && back > 0 && back < 1e9)
        // The radio's setvol took b to 50 % (−30 dB) and its pause silenced it; a heard neither.
        let bLevels = radio.gains.indices.filter { index in
            radio.series[index].heard["b"].map { $0 > setvol + 400e6 && $0 < paused } ?? false
        }.compactMap { radio.gains[$0].gain["b"] }
        print("partitions: b's gain after the radio's setvol: \(bLevels)")
        #expect(!bLevels.isEmpty && bLevels.allSatisfy { abs($0 - 0.0316) < 0.003 }, "b's gain after the radio's setvol: \(bLevels)")
        #expect(!bRadio.contains { $0 > paused + 600e6 && $0 < resumed }, "b played the radio while it was paused")

        // After a restart of the house, the partitions are back with their queues and rooms.
        server.interrupt()
        let (restarted, _) = try startServer(in: directory, arguments: ["--mpd", "127.0.0.1:0", "--music", music])
        defer { restarted.interrupt() }
        let newPort = Int(try restarted.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
        let check = try ChildProcess(name: "mpd-after-restart", executable: "/usr/bin/env", arguments: ["python3", "-c", """
            import json, mpd
            c = mpd.MPDClient(); c.connect("127.0.0.1", \(newPort))
            partitions = [p["partition"] for p in c.listpartitions()]
            default_queue = [s["file"] for s in c.playlistinfo()]
            c.partition("radio")
            print(json.dumps({"partitions": partitions, "default": default_queue, "radio": [s["file"] for s in c.playlistinfo()]}))
            """], standardError: directory.file("after-restart.log"))
        #expect(await check.exit(within: 30) == 0, "see after-restart.log")
        let after = check.outputLines.joined()
        print("partitions: after a restart: \(after)")
        #expect(after == #"{"partitions": ["default", "radio"], "default": ["album.flac"], "radio": ["radio.flac"]}"#, "\(after)")
    }
}

/// The same through Snapcast's control API: Home Assistant's library (Tests/Python/snapcast_move.py)
/// puts the radio room's group on the album's stream while both play, which moves the room into
/// the album's group; the cards show it.
extension MultiRoomEndToEndTests {
    @Test(.timeLimit(.minutes(3)))
    func aRoomMovesThroughSnapcastControl() async throws {
        let directory = try TemporaryDirectory("multiroom-snapcast-move")
        defer { directory.preserveLogs(as: "multiroom-snapcast-move"); directory.remove() }
        let albumPath = directory.file("album.flac"), radioPath = directory.file("radio.flac")
        try groupMusic(albumPath, seconds: 12, seed: 1)
        try groupMusic(radioPath, seconds: 12, seed: 2)
        let rooms = [RoomSpec(name: "a", offset: "300", drift: "50", device: "-30", latency: "0"),
                     RoomSpec(name: "b", offset: "-700", drift: "-80", device: "60", latency: "0")]
        let (server, port) = try startServer(in: directory, arguments: ["--snapcast-control", "127.0.0.1:0"])
        let controlPort = Int(try server.waitForLine(containing: "Snapcast controllers on").split(separator: ":")[2].prefix { $0.isNumber })!
        let speakers = try rooms.map { try startSpeaker($0, port: port, in: directory) }
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        try await waitForRooms(port) { reports in reports.count == rooms.count && reports.values.allSatisfy(\.hasSettledClock) }
        _ = try await send(.groupCreate(name: "Radio"), port: port)
        _ = try await send(.join(room: "b"), group: "Radio", port: port)
        #expect(try await send(.play(files: [albumPath]), port: port).started?.rooms == ["a"])
        #expect(try await send(.play(files: [radioPath]), group: "Radio", port: port).started?.rooms == ["b"])
        let deadline = Date().addingTimeInterval(30)
        while (try await send(.status, port: port).status?.positionSeconds ?? 0) < 3 {
            guard Date() < deadline else { throw TestFailure("the album did not reach 3 s") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let script = PythonScript.path("snapcast_move.py")
        let controller = try ChildProcess(name: "snapcast-move", executable: "/usr/bin/env", arguments: ["python3", script, "\(controlPort)", "b", "default"],
                                          standardError: directory.file("snapcast-move.log"))
        #expect(await controller.exit(within: 60) == 0, "see snapcast-move.log: \(controller.outputLines)")
        print("snapcast move: \(controller.outputLines.joined(separator: "\n"))")
        var steps: [String: [String: Any]] = [:]
        for line in controller.outputLines {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let name = object["step"] as? String else { continue }
            steps[name] = object
        }
        #expect((steps["connected"]?["groups"] as? [String: [String]]) == ["default": ["a"], "Radio": ["b"]])
        #expect((steps["grouped"]?["groups"] as? [String: [String]])?["default"] == ["a", "b"])
        let moved = try #require(steps["moved"]?["mono_ns"] as? NSNumber).doubleValue, stopped = try #require(steps["heard"]?["mono_ns"] as? NSNumber).doubleValue
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        let byName = Dictionary(uniqueKeysWithValues: try captures(in: directory, rooms: rooms).map { ($0.name, $0) })
        let album = SyncAnalysis.analyse(rooms: [byName["a"]!, byName["b"]!], reference: reference(albumPath))
        let radio = SyncAnalysis.analyse(rooms: [byName["b"]!], reference: reference(radioPath))
        let bAlbum = album.series.compactMap { $0.heard["b"] }, bRadio = radio.series.compactMap { $0.heard["b"] }
        // b played the radio until the move and the album from within a second of it, in sync
        // with a from a second after it; a played on with no jump.
        #expect(!bRadio.isEmpty && !bRadio.contains { $0 > moved + 250e6 }, "b played the radio after it moved")
        let joined = (bAlbum.first { $0 > moved } ?? .infinity) - moved
        let signed = album.series.compactMap { point -> (after: Double, skew: Double)? in
            guard let a = point.heard["a"], let b = point.heard["b"], b > moved + 1e9, b < stopped, a < stopped else { return nil }
            return ((b - moved) / 1e6, b - a)
        }
        let skews = signed.map { abs($0.skew) }.sorted()
        let skew = nearestRankPercentile(skews, 99) / 1000
        let trace = signed.map { "\(Int($0.after)) ms: \(Int($0.skew / 1000)) µs" }.joined(separator: ", ")
        print("snapcast move: b heard the album \(joined / 1e6) ms after the move; then p99 \(skew) µs over \(skews.count) checkpoints (b − a: \(trace)); b's jumps: \(album.jumps.filter { $0.room == "b" })")
        #expect(joined > 0 && joined < 1e9, "b joined the album \(joined / 1e6) ms after the move")
        #expect(skews.count >= 4 && skew <= 50, "a and b were \(skew) µs apart (p99) after the move")
        let aJumps = album.jumps.filter { jump in jump.room == "a" && (album.series.first { $0.frame == jump.frame }?.heard["a"] ?? 0) < stopped }
        #expect(aJumps.isEmpty, "a's album jumped: \(aJumps)")
    }
}
