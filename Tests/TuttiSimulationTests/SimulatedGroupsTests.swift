import Foundation
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiSimulation
import TuttiTestSupport

/// Groups in the simulated house: two groups play different music at once, and a room moves
/// from one to the other while both play. The same seed gives the same samples in every room;
/// each group's rooms are sample-aligned, and the moved room plays the new group's music.
@Suite(.serialized) struct SimulatedGroupsTests {
    @Test(.timeLimit(.minutes(6)))
    func aRoomMovesBetweenTwoGroupsDeterministically() async throws {
        let directory = try TemporaryDirectory("simulated-groups")
        defer { directory.remove() }
        // Both end before the run does (30 s of play, less the start delay).
        let (album, radio) = try await onOwnThread("the music") {
            (try SimulatedHouseTests.music(seconds: 28, tone: 220, seed: 3, in: directory),
             try SimulatedHouseTests.music(seconds: 28, tone: 330, seed: 4, in: directory))
        }
        var scenario = SimulatedHouse.Scenario.drawn(seed: 11, roomCount: 4, music: [album], playNanoseconds: 30_000_000_000, outageNanoseconds: 0)
        scenario.groups = [.init(name: "Radio", rooms: ["room3", "room4"], music: [radio])]
        scenario.moves = [.init(afterPlayNanoseconds: 12_000_000_000, room: "room2", group: "Radio")]
        let first = try await SimulatedHouseTests.run(scenario)
        let second = try await SimulatedHouseTests.run(scenario)
        print("simulated groups: \(first.simulatedNanoseconds / 1_000_000_000) s in \(first.wallSeconds) s; digests \(first.rooms.map { String($0.digest.prefix(12)) })")
        for line in first.events where line.contains("moved") || line.contains("refused") { print("  \(line)") }
        #expect(first.rooms.map(\.digest) == second.rooms.map(\.digest), "the same seed played other samples")
        #expect(!first.events.contains { $0.contains("refused") }, "\(first.events.filter { $0.contains("refused") })")
        let captures = Dictionary(uniqueKeysWithValues: first.rooms.compactMap { room in
            room.capture.map { (room.name, SyncAnalysis.Room(name: room.name, capture: $0, latencyNanoseconds: 0)) }
        })
        // Seconds of CPU: off the cooperative pool, which the other suites' network tasks need.
        let (albumHeard, radioHeard) = try await onOwnThread("the analysis") {
            (SyncAnalysis.analyse(rooms: ["room1", "room2"].map { captures[$0]! }, reference: try TestMedia.decodeWithFFmpeg(album), interval: 48000),
             SyncAnalysis.analyse(rooms: ["room3", "room4", "room2"].map { captures[$0]! }, reference: try TestMedia.decodeWithFFmpeg(radio), interval: 48000))
        }
        print("simulated groups: album p99 \(albumHeard.percentile(99) / 1000) µs, rooms per checkpoint \(albumHeard.roomsPerCheckpoint)")
        print("simulated groups: radio p99 \(radioHeard.percentile(99) / 1000) µs, rooms per checkpoint \(radioHeard.roomsPerCheckpoint)")
        // The album: room1 throughout, room2 until it moved (12 s in): sample-aligned, nothing lost.
        #expect(albumHeard.roomsPerCheckpoint.prefix(10).allSatisfy { $0 == 2 } && albumHeard.roomsPerCheckpoint.suffix(10).allSatisfy { $0 == 1 })
        #expect(albumHeard.percentile(99) / 1000 < 50)
        #expect(albumHeard.discontinuities["room1"] == 0 && albumHeard.unmatched["room1"] == 0)
        // The radio: rooms 3 and 4 throughout, room2 from within a second of its move.
        #expect(radioHeard.roomsPerCheckpoint.prefix(10).allSatisfy { $0 == 2 } && radioHeard.roomsPerCheckpoint.suffix(10).allSatisfy { $0 == 3 })
        #expect(radioHeard.percentile(99) / 1000 < 50)
        let joined = radioHeard.series.firstIndex { $0.heard["room2"] != nil }.map { radioHeard.series[$0].frame } ?? .max
        let left = albumHeard.series.lastIndex { $0.heard["room2"] != nil }.map { albumHeard.series[$0].frame } ?? .max
        print("simulated groups: room2 last heard the album at timeline second \(left / 48000), first heard the radio at \(joined / 48000)")
        #expect(left / 48000 <= 12 && joined / 48000 <= 14)
        for room in first.rooms {
            print("simulated groups: \(room.name): starved \(room.starvedBlocks), resyncs \(room.resyncs), bound covers \(room.reportedBoundCoverage)")
            #expect(room.starvedBlocks == 0 && room.resyncs == 0, "\(room.name)")
            #expect(room.reportedBoundCoverage >= 0.99, "\(room.name)")
        }
    }
}
