import Foundation
import GRDB
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// A house killed mid-track and started again on the same state directory: it reopens its
/// store (`HouseStore`) and takes up the stream its rooms still play, on the same timeline.
@Suite(.serialized) struct HouseRestartTests {
    static func noise(_ path: String, seconds: Int, seed: Int) throws {
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=\(seconds):c=brown:a=0.3:seed=\(seed)",
                              "-af", "pan=stereo|c0=c0|c1=0.7*c0", "-ar", "48000", path])
    }

    /// The rooms hold the whole stream (a 4 s item and a 2 s one) when the house dies, at
    /// `secondsIn` seconds into play. The restarted house resumes the same stream: a room that
    /// reconnects saying what it holds keeps what comes before the resume frame (the frame an
    /// edit could still change once rooms have reconnected: 2.75 s ahead) and is sent, after a
    /// flush there, exactly the audio it had from there on; at 1.3 s that is inside the
    /// second item. What the house reports is what is heard.
    @Test(arguments: [1.0, 1.3])
    func aRestartedHouseResumesTheStreamItsRoomsPlay(secondsIn: Double) async throws {
        let directory = try TemporaryDirectory("house-restart")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        try Self.noise(a, seconds: 4, seed: 1)
        try Self.noise(b, seconds: 2, seed: 2)
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let first = HouseHarness(configuration: configuration)
        try await first.connect("kitchen")
        _ = try await first.control(.play(files: [a, b]))
        let stream = try await first.waitForProduction()
        let original = try await first.messages("kitchen")
        let total = 6 * 48000
        let heard = try HouseHarness.audio(original, stream: stream.id, from: 0, frames: total)
        let start = try #require(stream.schedule.anchors.first)
        first.clock.set(to: start.serverTime + Int64(secondsIn * 1e9))
        let before = try await first.control(.status).status
        // Killed: nothing more reaches the store.

        let second = HouseHarness(configuration: configuration, clock: first.clock)
        try await second.onLoop { $0.resumeStoredStreams() }
        let resumed = try await second.control(.status).status
        #expect(resumed?.stream == stream.id)
        #expect(resumed?.state == "playing")
        #expect(resumed?.item == before?.item)
        #expect(resumed?.positionSeconds == before?.positionSeconds)
        #expect(resumed?.itemPositionSeconds.map { abs($0 - (before?.itemPositionSeconds ?? -1)) < 1e-6 } == true,
                "\(String(describing: resumed?.itemPositionSeconds)) vs \(String(describing: before?.itemPositionSeconds))")
        #expect(resumed?.title == before?.title)

        try await second.connect("kitchen", resume: .init(streamID: stream.id, epoch: 0, held: [0..<Int64(total)]))
        _ = try await second.waitForProduction()
        let sent = try await second.messages("kitchen")
        #expect(!sent.contains { if case .streamStart = $0 { return true } else { return false } }, "the room keeps its stream")
        let flush = try #require(sent.compactMap { if case .flush(let m) = $0 { return m } else { return nil } }.first)
        // The edit lead and the rooms' reconnect allowance (2.5 s) beyond where the house stopped.
        let resumeFrame = Int64((secondsIn * 48000).rounded()) + House.Configuration().editLeadNanoseconds * 48 / 1_000_000 + 120_000
        #expect(flush.fromFrame == resumeFrame && flush.epoch == 1, "\(flush)")
        let chunks = sent.compactMap { if case .audioChunk(let m) = $0 { return m } else { return nil } }
        #expect(chunks.first?.firstFrame == resumeFrame)
        // Decoded with the header the room already holds.
        let again = try HouseHarness.audio(original.filter { if case .audioChunk = $0 { return false } else { return true } } + sent,
                                           stream: stream.id, from: resumeFrame, frames: total - Int(resumeFrame))
        let expected = Array(heard[(Int(resumeFrame) * 2)...])
        #expect(!again.contains { $0.isNaN }, "every frame from the resume frame on was sent again")
        #expect(SignalCheck.maxDifference(again, expected) < 1e-6)
        #expect(sent.contains { if case .streamEnd(let m) = $0 { return m.endFrame == Int64(total) } else { return false } })
        #expect(second.logLines.all.contains { $0.contains("resuming stream \(stream.id), heard at timeline frame \(Int64(secondsIn * 48000))") })
    }

    /// Down for longer than the stream: nothing to resume, and the house says so.
    @Test func aStreamThatEndedWhileTheHouseWasDownIsNotResumed() async throws {
        let directory = try TemporaryDirectory("house-restart-ended")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try Self.noise(a, seconds: 1, seed: 3)
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let first = HouseHarness(configuration: configuration)
        try await first.connect("kitchen")
        _ = try await first.control(.play(files: [a]))
        let stream = try await first.waitForProduction()
        first.clock.advance(by: 5_000_000_000)
        let second = HouseHarness(configuration: configuration, clock: first.clock)
        try await second.onLoop { $0.resumeStoredStreams() }
        #expect(try await second.control(.status).status?.state == "stopped")
        #expect(second.logLines.all.contains { $0.contains("(\(stream.id)) ended at timeline frame 48000 while it was down") })
        #expect(try await second.control(.queue).queue?.items.map(\.path) == [a])
    }

    /// Groups, their rooms, queues and play modes, and what each plays, survive a restart: both
    /// groups' streams are taken up, each on its own timeline, and each room goes back to its
    /// group when it reconnects.
    @Test func groupsAndWhatTheyPlaySurviveARestart() async throws {
        let directory = try TemporaryDirectory("house-restart-groups")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac")
        for (index, path) in [a, b, c].enumerated() { try Self.noise(path, seconds: 4, seed: index + 1) }
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let first = HouseHarness(configuration: configuration)
        try await first.connect("kitchen")
        try await first.connect("hall")
        _ = try await first.control(.groupCreate(name: "Radio"))
        _ = try await first.control(.join(room: "hall"), group: "Radio")
        _ = try await first.control(.playModes(repeat: true), group: "Radio")
        _ = try await first.control(.play(files: [a]))
        _ = try await first.control(.play(files: [b, c]), group: "Radio")
        _ = try await first.control(.volume(room: "hall", percent: 30))
        let before = try #require(try await first.control(.groups).groups)
        #expect(before.groups.map(\.name) == ["default", "Radio"] && before["Radio"]?.rooms == ["hall"] && before["default"]?.rooms == ["kitchen"])
        // Each stream's first item is stored before any of its audio is made (on the producer
        // threads): a house killed before that has nothing of it to take up.
        try await first.runLoop(until: "both groups' first audio") { house in house.orderedGroups.allSatisfy { ($0.stream?.producedEnd ?? 0) > 0 } }
        let streams = try await first.onLoop { house in house.orderedGroups.map { $0.stream?.id } }
        first.clock.advance(by: 1_000_000_000)

        let second = HouseHarness(configuration: configuration, clock: first.clock)
        try await second.onLoop { $0.resumeStoredStreams() }
        let after = try #require(try await second.control(.groups).groups)
        #expect(after.groups.map(\.name) == ["default", "Radio"])
        #expect(after["Radio"]?.knownRooms == ["hall"] && after["default"]?.knownRooms == ["kitchen"] && after["Radio"]?.rooms == [])
        #expect(after.groups.map(\.state) == ["playing", "playing"] && after.groups.map(\.stream) == streams, "\(after)")
        #expect(try await second.control(.queue, group: "Radio").queue?.items.map(\.path) == [b, c])
        #expect(try await second.control(.status, group: "Radio").status?.playModes?.repeat == true)
        #expect(try await second.control(.queue).queue?.items.map(\.path) == [a])
        // The hall reconnects: into the radio, at its volume, sent the radio's stream.
        try await second.connect("hall")
        let rooms = try #require(try await second.control(.rooms).rooms)
        #expect(rooms["hall"]?.group == "Radio" && rooms["hall"]?.volume == 30)
        let sent = try await second.messages("hall")
        #expect(sent.contains { if case .streamStart(let start) = $0 { start.streamID == streams[1] } else { false } })
        #expect(!sent.contains { if case .streamStart(let start) = $0 { start.streamID == streams[0] } else { false } })
    }

    /// Queue edits, volumes and the group are each committed as they are made; an old
    /// `house.json` is imported once; a store that is not a database is moved aside.
    @Test func theStoreKeepsEachChangeAndImportsTheOldStateOnce() async throws {
        let directory = try TemporaryDirectory("house-store")
        defer { directory.remove() }
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #"{"queue":["/music/x.flac","/music/y.flac"],"volumes":{"kitchen":40},"group":["kitchen"]}"#
            .write(toFile: state + "/house.json", atomically: true, encoding: .utf8)
        var configuration = House.Configuration()
        configuration.stateDirectory = state
        let first = HouseHarness(configuration: configuration)
        #expect(try await first.onLoop { $0.defaultGroup.queue } == ["/music/x.flac", "/music/y.flac"])
        #expect(try await first.onLoop { $0.rooms.records.values.map { "\($0.name) \($0.volume)" } } == ["kitchen 40"])
        #expect(FileManager.default.fileExists(atPath: state + "/house.json.migrated"))
        #expect(!FileManager.default.fileExists(atPath: state + "/house.json"))
        let z = directory.file("z.flac")
        try Self.noise(z, seconds: 1, seed: 4)
        try await first.connect("kitchen", latency: 30_000_000)
        _ = try await first.control(.queueAdd(file: z, at: 1))
        _ = try await first.control(.queueMove(from: 0, to: 2))
        _ = try await first.control(.volume(room: "kitchen", percent: 70))

        let second = HouseHarness(configuration: configuration, clock: first.clock)
        let kept = try await second.onLoop { ($0.defaultGroup.queue, $0.defaultGroup.tags, $0.rooms.records.values.map { "\($0.name) \($0.volume) \($0.latencyKnown ?? -1)" }) }
        #expect(kept.0 == [z, "/music/y.flac", "/music/x.flac"])
        #expect(kept.1 == [2, 1, 0], "tags move with their entries")
        #expect(kept.2 == ["kitchen 70 30000000"])
        #expect(second.logLines.all.isEmpty, "\(second.logLines.all)")

        try "not a database, not at all".write(toFile: state + "/house.sqlite", atomically: true, encoding: .utf8)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: state + "/house.sqlite" + suffix) }
        let third = HouseHarness(configuration: configuration, clock: first.clock)
        #expect(try await third.onLoop { $0.defaultGroup.queue.isEmpty && $0.rooms.records.isEmpty && $0.groups.count == 1 })
        #expect(third.logLines.all.contains { $0.contains("house.sqlite: damaged store") && $0.contains("moved to") }, "\(third.logLines.all)")
    }

    /// A damaged store is moved aside whole, its `-wal` and `-shm` with it (they may hold the
    /// last commits); a store that is only busy (another process holds SQLite's lock) is left
    /// exactly as it is, and the house runs without a store and says so.
    @Test(.timeLimit(.minutes(1)))
    func aDamagedStoreIsMovedAsideWholeAndABusyOneIsLeftAlone() async throws {
        let directory = try TemporaryDirectory("store-damage")
        defer { directory.remove() }
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let path = state + "/house.sqlite"
        try "not a database, not at all".write(toFile: path, atomically: true, encoding: .utf8)
        try "the last commits".write(toFile: path + "-wal", atomically: true, encoding: .utf8)
        var configuration = House.Configuration()
        configuration.stateDirectory = state
        let damaged = HouseHarness(configuration: configuration)
        #expect(try await damaged.onLoop { $0.store != nil })
        let line = try #require(damaged.logLines.all.first { $0.contains("damaged store") }, "\(damaged.logLines.all)")
        let aside = try #require(try FileManager.default.contentsOfDirectory(atPath: state).first { $0.hasPrefix("house.sqlite.damaged-") && !$0.contains("-wal") })
        #expect(line.contains("moved to \(state)/\(aside)"), "\(line)")
        #expect(try String(contentsOfFile: state + "/" + aside, encoding: .utf8) == "not a database, not at all")
        #expect(try String(contentsOfFile: state + "/" + aside + "-wal", encoding: .utf8) == "the last commits")

        // Another process's exclusive transaction (a rollback-journal database, whose writer
        // keeps readers out): busy, not damaged.
        let other = directory.file("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let holder = try DatabaseQueue(path: other + "/house.sqlite")
        try await holder.write { try $0.execute(sql: "CREATE TABLE kept (x INTEGER)") }
        var busyConfiguration = configuration
        busyConfiguration.stateDirectory = other
        busyConfiguration.storeBusyTimeoutSeconds = 0.2
        try holder.inTransaction(.exclusive) { db in
            try db.execute(sql: "INSERT INTO kept VALUES (1)")
            let busy = HouseHarness(configuration: busyConfiguration)
            #expect(busy.logLines.all.contains { $0.contains("cannot open the store") && $0.contains("left as it is") }, "\(busy.logLines.all)")
            return .commit
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: other).allSatisfy { !$0.contains("damaged") })
        #expect(try await holder.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM kept") } == 1)
    }

    /// A write that fails (the disk full) is in the reply of the command that made it and in
    /// every status until the store takes writes again, not only in the log; the house plays
    /// on meanwhile.
    @Test(.timeLimit(.minutes(1)))
    func aFailedWriteIsInTheStatusUntilTheStoreWorksAgain() async throws {
        let directory = try TemporaryDirectory("store-full")
        defer { directory.remove() }
        let tone = directory.file("tone.flac")
        try Self.noise(tone, seconds: 1, seed: 9)
        // Two hundred names of 200 bytes: a queue that needs pages the capped store does not have.
        var files: [String] = []
        for index in 0..<200 {
            let link = directory.file(String(repeating: "n", count: 190) + "\(index).flac")
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: tone)
            files.append(link)
        }
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let harness = HouseHarness(configuration: configuration)
        #expect(try await harness.onLoop { $0.statusReport(of: $0.defaultGroup).storeProblem } == nil)
        try await harness.onLoop { core in Result { try core.store!.limitPages(to: 1) } }.get()
        let played = try await harness.control(.play(files: files))
        // The reply of the command whose write failed says so.
        #expect(played.storeProblem?.contains("database or disk is full") == true, "\(played)")
        let problem = try await harness.onLoop { $0.statusReport(of: $0.defaultGroup).storeProblem }
        #expect(problem?.contains("database or disk is full") == true, "\(problem ?? "no problem reported"); \(harness.logLines.all)")
        // The queue's write failed and was tried again with every later write, and is logged
        // once. (The producer logs each item start it cannot store, apart, as many as it made.)
        #expect(harness.logLines.all.filter { $0.contains("cannot store default's queue") }.count == 1, "logged once: \(harness.logLines.all)")
        #expect(try await harness.onLoop { $0.defaultGroup.queue.count } == 200, "the house goes on with what it could not keep")

        try await harness.onLoop { core in Result { try core.store!.limitPages(to: 1_000_000) } }.get()
        let removed = try await harness.control(.queueRemove(index: 199))
        #expect(removed.storeProblem == nil, "\(removed)")
        #expect(try await harness.onLoop { $0.statusReport(of: $0.defaultGroup).storeProblem } == nil)
        #expect(harness.logLines.all.contains { $0.contains("the store takes writes again") })
    }
}
