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
        try await ControlClient.send(ControlRequest(command, group: group), host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
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

        func reference(_ path: String) -> [Float] {
            let reader = GaplessQueueReader(paths: [path], outputRate: 48000, channelCount: 2)
            var samples: [Float] = [], block: [Float] = []
            while reader.read(into: &block) > 0 { samples += block }
            return samples
        }
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
