import Foundation
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// Groups in a house on a testing loop: what a command does to groups and rooms, and how it is
/// refused, message by message.
@Suite(.serialized) struct HouseGroupsTests {
    func refusal(_ harness: HouseHarness, _ command: ControlCommand, group: String? = nil) async throws -> String? {
        do {
            _ = try await harness.control(command, group: group)
            return nil
        } catch let failure as TestFailure {
            return failure.description
        }
    }

    @Test func roomsMoveAndCommandsNameTheirGroups() async throws {
        let directory = try TemporaryDirectory("house-groups")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:d=2", "-ar", "48000", "-ac", "2", a])
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        try await harness.connect("hall")
        try await harness.connect("3")
        // A speaker named with digits alone gets a room name that cannot be taken for an id.
        #expect(try await harness.control(.rooms).rooms?.rooms.map(\.name) == ["hall", "kitchen", "room 3"])
        _ = try await harness.control(.groupCreate(name: "Radio"))
        _ = try await harness.control(.join(room: "hall"), group: "Radio")
        // leave, without a group named, takes a room out of whichever group it is in.
        let left = try #require(try await harness.control(.leave(room: "hall")).room)
        #expect(left.group == "hall")
        // A command that does not act on a group ignores the group named.
        #expect(try await harness.control(.rooms, group: "Nowhere").rooms?.rooms.count == 3)
        // A play that is refused moves no room.
        #expect(try await refusal(harness, .play(files: [directory.file("missing.flac")], rooms: ["kitchen"]), group: "Radio")?.contains("no such file") == true)
        #expect(try await harness.control(.rooms).rooms?["kitchen"]?.group == "default")
        // Bad names and bad references, each refused with its reason.
        #expect(try await refusal(harness, .groupCreate(name: "42"))?.contains("digits alone") == true)
        #expect(try await refusal(harness, .roomRename(room: "kitchen", to: "7"))?.contains("digits alone") == true)
        #expect(try await refusal(harness, .groupCreate(name: "Radio"))?.contains("a group named Radio exists") == true)
        #expect(try await refusal(harness, .pause, group: "Nowhere")?.contains("no such group: Nowhere") == true)
        #expect(try await refusal(harness, .groupRemove, group: "default")?.contains("cannot be removed") == true)
        #expect(try await refusal(harness, .join(room: "kitchen"))?.contains("already in group default") == true)
        #expect(try await refusal(harness, .join(room: "attic"), group: "Radio")?.contains("no such room: attic") == true)
        // Ids name rooms and groups as names do.
        let radio = try #require(try await harness.control(.groups).groups?["Radio"])
        let kitchen = try #require(try await harness.control(.rooms).rooms?["kitchen"])
        #expect(try await harness.control(.join(room: String(kitchen.id)), group: String(radio.id)).room?.group == "Radio")
    }

    /// A group removed while its play waits for its rooms: the play is answered with a refusal
    /// saying so, and its rooms go to the default group.
    @Test func removingAGroupSupersedesItsWaitingPlay() async throws {
        let directory = try TemporaryDirectory("house-groups-remove")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:d=2", "-ar", "48000", "-ac", "2", a])
        let harness = HouseHarness(waitsForRooms: true)
        try await harness.connect("kitchen")
        _ = try await harness.control(.groupCreate(name: "Radio"))
        _ = try await harness.control(.join(room: "kitchen"), group: "Radio")
        let box = ReplyBox()
        let json = ControlJSON.encode(ControlRequest(.play(files: [a]), group: "Radio"))
        let house = harness.house
        try await harness.loop.executeInContext { house.control(json: json) { ok, json in box.set(ok, json) } }
        await harness.loop.run()
        #expect(box.value == nil, "the play did not wait for its room")
        _ = try await harness.control(.groupRemove, group: "Radio")
        let reply = try #require(box.value)
        #expect(!reply.ok && ControlJSON.decodeRefusal(reply.json).error.contains("removed before its play started"), "\(reply)")
        #expect(try await harness.control(.rooms).rooms?["kitchen"]?.group == "default")
    }

    /// A volume set while a room is away reaches it when it comes back, 100 % too.
    @Test func aRoomThatReconnectsIsSentItsSettings() async throws {
        let harness = HouseHarness()
        let first = try await harness.connect("kitchen")
        _ = try await harness.control(.volume(room: "kitchen", percent: 40))
        try await harness.onLoop { $0.disconnect(connectionID: first) }
        _ = try await harness.control(.volume(room: "kitchen", percent: 100))
        _ = try await harness.messages("kitchen")
        try await harness.connect("kitchen")
        let sent = try await harness.messages("kitchen")
        #expect(sent.contains { if case .volume(let volume) = $0 { volume.level == 1 } else { false } }, "\(sent)")
        #expect(sent.contains { if case .roomSettings(let settings) = $0 { settings.name == "kitchen" } else { false } })
    }
}
