import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiEngine
import TuttiProtocol
import TuttiSimulation
@testable import TuttiDiagnostics
import TuttiTestSupport

/// AirPlay senders into groups: pyatv (`atvremote`, in the venv `make test` makes) streams a
/// file to `tutti server --airplay`'s receiver of the default group, whose two rooms have
/// skewed clocks and crystals, while a second pyatv streams another file to a second group's
/// receiver; checked from what the rooms' virtual sound cards emitted.
extension MultiRoomEndToEndTests {
    static let atvremote = FileManager.default.currentDirectoryPath + "/out/venv-pyatv/bin/atvremote"

    /// pyatv streaming `file` to the AirPlay receiver on `port`: over AirPlay 2 (transient
    /// pairing, encrypted) when the properties give the receiver's AirPlay 2 features, as its
    /// announcement does; over AirPlay 1 when they do not, as older announcements did.
    func airPlaySender(_ file: String, port: Int, airPlay2: Bool = true, in directory: TemporaryDirectory, log: String) throws -> ChildProcess {
        try ChildProcess(name: "atvremote", executable: Self.atvremote,
                         arguments: ["--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-test-\(port)",
                                     "--service-properties", ";md=0,1,2;et=0;cn=0,1;tp=UDP" + (airPlay2 ? ";ft=0x400F8200,0x10040" : ""), "stream_file=\(file)"],
                         standardError: directory.file(log))
    }

    @Test(.timeLimit(.minutes(3)))
    func airPlaySendersPlayIntoTwoGroupsAtOnceInSyncThenTheQueueIsBackPaused() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.atvremote), "pyatv's atvremote is not at \(Self.atvremote): run make test (it makes the venv)")
        let directory = try TemporaryDirectory("multiroom-airplay")
        defer { directory.preserveLogs(as: "multiroom-airplay"); directory.remove() }
        // What the phone plays: chords with vibrato and seeded noise at 44.1 kHz (AirPlay's
        // rate; the house converts it to its 48 kHz), with tags pyatv sends as metadata.
        let music = directory.file("airplay.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=220:d=8", "-f", "lavfi", "-i", "sine=f=331:d=8", "-f", "lavfi", "-i", "anoisesrc=d=8:c=pink:a=0.15:seed=35",
                              "-filter_complex", "[0]vibrato=f=5[x];[x][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=0.8*c0,aresample=44100",
                              "-c:a", "pcm_s16le", "-metadata", "title=Phone Tune", "-metadata", "artist=Tutti Tests", "-metadata", "album=AirPlay", music])
        // What a second phone plays into the kitchen at the same time.
        let other = directory.file("kitchen.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=6:c=pink:a=0.25:seed=36", "-af", "pan=stereo|c0=c0|c1=-0.7*c0,aresample=44100",
                              "-c:a", "pcm_s16le", "-metadata", "title=Kitchen Tune", other])
        // The queue the group had: digital silence, so that the cards' first sound is the sender's.
        let queued = directory.file("queued.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=48000:cl=stereo", "-t", "60", queued])

        let rooms = [RoomSpec(name: "a", offset: "400", drift: "60", device: "-40", latency: "0"),
                     RoomSpec(name: "b", offset: "-900", drift: "-70", device: "50", latency: "15"),
                     RoomSpec(name: "c", offset: "120", drift: "30", device: "-80", latency: "0")]
        let (server, port) = try startServer(in: directory, arguments: ["--airplay", "127.0.0.1:0", "--mpd", "127.0.0.1:0"])
        var speakers: [ChildProcess] = []
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        let airplayLine = try server.waitForLine(containing: "AirPlay senders on")
        let mpdLine = try server.waitForLine(containing: "MPD clients on")
        let mpdPort = try #require(mpdLine.split(separator: "127.0.0.1:").last?.split(separator: " ").first.flatMap { Int($0) }, "\(mpdLine)")
        let airplayPort = try #require(airplayLine.split(separator: "127.0.0.1:").last?.split(separator: " ").first.flatMap { Int($0) }, "\(airplayLine)")
        for room in rooms { speakers.append(try startSpeaker(room, port: port, in: directory)) }
        try await waitForRooms(port) { $0.count == rooms.count && $0.values.allSatisfy(\.hasSettledClock) }
        // c is the kitchen, a group of its own with a receiver of its own.
        _ = try await send(.groupCreate(name: "Kitchen"), port: port)
        _ = try await send(.join(room: "c"), group: "Kitchen", port: port)
        var kitchenAddress: String?
        let listed = Date().addingTimeInterval(10)
        while Date() < listed, kitchenAddress == nil {
            kitchenAddress = try await send(.groups, port: port).groups?["Kitchen"]?.airplay
            if kitchenAddress == nil { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        let kitchenPort = try #require(kitchenAddress?.split(separator: ":").last.flatMap { Int($0) }, "the Kitchen group got no AirPlay receiver")
        #expect(try await send(.groups, port: port).groups?.groups.first(where: \.isDefault)?.airplay == "127.0.0.1:\(airplayPort)")

        // The queue plays, then is paused 2 s in.
        _ = try await send(.play(files: [queued]), port: port)
        try await waitForRooms(port) { $0["a"]?.state == "playing" && $0["b"]?.state == "playing" }
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let paused = try #require(try await send(.pause, port: port).paused?.pausedAtSeconds)

        let sender = try airPlaySender(music, port: airplayPort, in: directory, log: "atvremote.log")
        let kitchenSender = try airPlaySender(other, port: kitchenPort, airPlay2: false, in: directory, log: "atvremote-kitchen.log")
        // While it plays: the status names the sender and what it plays.
        var playing: StatusReport?
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let status = try await send(.status, port: port).status
            if status?.source != nil, status?.state == "playing", status?.title == "Phone Tune" { playing = status; break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let statusThen = try await send(.status, port: port).status
        let live = try #require(playing, "the status never showed the sender playing: \(String(describing: statusThen))")
        #expect(live.source?.kind == "airplay" && live.artist == "Tutti Tests" && live.album == "AirPlay", "\(String(describing: live.source))")
        // MPD's clients see it as a stream: mpc's current song is the sender's (`|` would be
        // mpc's "or" in a format).
        let current = String(decoding: try TestMedia.run("mpc", ["-h", "127.0.0.1", "-p", "\(mpdPort)", "-f", "%title%;%artist%;%album%;%file%", "current"]), as: UTF8.self)
        #expect(current.hasPrefix("Phone Tune;Tutti Tests;AirPlay;airplay://127.0.0.1"), "mpc current: \(current)")
        // A controller cannot seek a sender's stream.
        await #expect(throws: ControlRefusal.self) { _ = try await send(.seek(seconds: 1), port: port) }
        let kitchen = try await send(.status, group: "Kitchen", port: port).status
        #expect(kitchen?.source?.kind == "airplay", "\(String(describing: kitchen))")
        #expect(await sender.exit(within: 60) == 0, "atvremote: \((try? String(contentsOfFile: directory.file("atvremote.log"), encoding: .utf8))?.suffix(3000) ?? "")")
        #expect(await kitchenSender.exit(within: 60) == 0, "atvremote: \((try? String(contentsOfFile: directory.file("atvremote-kitchen.log"), encoding: .utf8))?.suffix(3000) ?? "")")

        // Once what it sent is heard, the queue is back, paused where it was.
        var back: StatusReport?
        let end = Date().addingTimeInterval(20)
        while Date() < end {
            let status = try await send(.status, port: port).status
            if status?.source == nil, status?.state == "paused" { back = status; break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let statusAfter = try await send(.status, port: port).status
        let queue = try #require(back, "the queue did not come back paused: \(String(describing: statusAfter))")
        #expect(queue.item == 0 && abs((queue.itemPositionSeconds ?? -1) - paused) < 0.5, "paused at \(paused) s, back at \(String(describing: queue.itemPositionSeconds))")
        for speaker in speakers { #expect(speaker.interrupt() == 0) }
        speakers = []

        // What the cards emitted: the sender's audio, in both rooms, in sync, at its level.
        let analysis = SyncAnalysis.analyse(rooms: try captures(in: directory, rooms: Array(rooms.prefix(2))), reference: reference(music), interval: 6000)
        let p99 = analysis.percentile(99) / 1000, p50 = analysis.percentile(50) / 1000
        print("AirPlay into two rooms: skew p50 \(p50) µs, p99 \(p99) µs, max \(analysis.maximum / 1000) µs over \(analysis.skews.count) checkpoints; "
              + "rooms heard per checkpoint \(analysis.roomsPerCheckpoint); group volume \(live.groupVolume ?? -1) %")
        #expect(analysis.skews.count > 40)
        #expect(analysis.roomsPerCheckpoint.allSatisfy { $0 == 2 }, "\(analysis.roomsPerCheckpoint)")
        #expect(p99 < 250, "p99 inter-room skew \(p99) µs")
        for room in ["a", "b"] {
            #expect(analysis.underruns[room] == 0, "\(room) underran")
            #expect(analysis.discontinuities[room] == 0, "\(room) jumped: \(analysis.jumps.prefix(3))")
            #expect(analysis.unmatched[room] == 0, "\(room): \(analysis.unmatched)")
        }
        // The level pyatv asked for: the group's volume (0.6 dB a percent below 100 %) in both cards.
        let volume = try #require(live.groupVolume)
        let expected = volume <= 0 ? 0 : pow(10, Double(volume - 100) * 0.6 / 20)
        for room in ["a", "b"] {
            let gains = analysis.gains.compactMap { $0.gain[room] }
            #expect(!gains.isEmpty && gains.allSatisfy { abs($0 - expected) < 0.02 * max(expected, 0.05) }, "\(room)'s gains \(gains.prefix(5)) against \(expected)")
        }
        // The kitchen heard its own sender's audio, whole, at the same time.
        let inKitchen = SyncAnalysis.analyse(rooms: try captures(in: directory, rooms: [rooms[2]]), reference: reference(other), interval: 6000)
        print("AirPlay into the kitchen: \(inKitchen.roomsPerCheckpoint.count) checkpoints, unmatched \(inKitchen.unmatched), started at \(inKitchen.startTimes)")
        #expect(inKitchen.roomsPerCheckpoint.count > 30 && inKitchen.roomsPerCheckpoint.allSatisfy { $0 == 1 }, "\(inKitchen.roomsPerCheckpoint)")
        #expect(inKitchen.underruns["c"] == 0 && inKitchen.discontinuities["c"] == 0 && inKitchen.unmatched["c"] == 0)
    }
}
