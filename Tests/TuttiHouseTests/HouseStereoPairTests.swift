import Foundation
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// Stereo pairs and channel modes in a house on a testing loop: what each half's speaker is
/// told, how the pair shows to controllers, what acts on both halves, what is refused and why,
/// and that a restarted house keeps it.
@Suite(.serialized) struct HouseStereoPairTests {
    /// The channel modes a room's speaker was told, in order.
    func channels(_ harness: HouseHarness, _ room: String) async throws -> [ChannelMode] {
        try await harness.messages(room).compactMap { if case .roomSettings(let settings) = $0 { settings.channelMode } else { nil } }
    }

    func volumes(_ harness: HouseHarness, _ room: String) async throws -> [Float] {
        try await harness.messages(room).compactMap { if case .volume(let volume) = $0 { volume.level } else { nil } }
    }

    func refusal(_ harness: HouseHarness, _ command: ControlCommand, group: String? = nil) async throws -> String {
        do {
            _ = try await harness.control(command, group: group)
            return "not refused"
        } catch let failure as TestFailure {
            return failure.description
        }
    }

    @Test func twoRoomsBoundAsOnePair() async throws {
        let directory = try TemporaryDirectory("house-pairs")
        defer { directory.remove() }
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        var house = HouseHarness(configuration: configuration)
        for name in ["kl", "kr", "bath"] { try await house.connect(name) }
        for name in ["kl", "kr", "bath"] { _ = try await house.messages(name) }

        let pair = try #require(try await house.control(.pair(left: "kl", right: "kr", name: "Kitchen")).room)
        #expect(pair.room == "Kitchen" && pair.pair?.left.name == "kl" && pair.pair?.right.name == "kr" && pair.channel == nil, "\(pair)")
        #expect(try await channels(house, "kl") == [.left])
        #expect(try await channels(house, "kr") == [.right])
        // One room to controllers, found by its name, its id or either half's name.
        #expect(try await house.control(.rooms).rooms?.rooms.map(\.name) == ["bath", "Kitchen"])
        #expect(try await house.control(.status).status?.roomCount == 2)
        // Its volume and latency are both halves'.
        #expect(try await house.control(.volume(room: "kr", percent: 90)).room?.room == "Kitchen")
        #expect(try await volumes(house, "kl").count == 1)
        #expect(try await volumes(house, "kr").count == 1)
        #expect(try await house.control(.roomLatency(room: "Kitchen", milliseconds: 30)).room?.latencyMs == 30)
        let latencies = try await house.messages("kr").compactMap { if case .roomSettings(let s) = $0 { s.latencyNanoseconds } else { nil } }
        #expect(latencies == [30_000_000])
        // It moves as one room, and a play in it keeps both halves.
        _ = try await house.control(.groupCreate(name: "Radio"))
        #expect(try await house.control(.join(room: "Kitchen"), group: "Radio").room?.group == "Radio")
        #expect(try await house.control(.groups).groups?["Radio"]?.rooms == ["Kitchen"])
        let radio = try #require(try await house.control(.groups).groups?["Radio"]?.id)
        let halves = try await house.onLoop { core in ["kl", "kr"].map { name in core.rooms.records.values.first { $0.name == name }?.group } }
        #expect(halves == [radio, radio], "\(halves)")
        // A rename names the pair; its halves keep their names for when it is unbound.
        #expect(try await house.control(.roomRename(room: "Kitchen", to: "Küche")).room?.room == "Küche")
        // Refused, each with its reason.
        #expect(try await refusal(house, .pair(left: "kl", right: "bath", name: "X")).contains("is a stereo pair already"))
        #expect(try await refusal(house, .pair(left: "bath", right: "bath", name: "X")).contains("cannot be paired with itself"))
        #expect(try await refusal(house, .roomChannel(room: "Küche", channel: .mono)).contains("unpair it first"))
        #expect(try await refusal(house, .unpair(room: "bath")).contains("is not a stereo pair"))
        #expect(try await refusal(house, .pair(left: "bath", right: "attic", name: "X")).contains("no such room: attic"))
        #expect(try await refusal(house, .pair(left: "bath", right: "kl", name: "  ")).contains("needs a name"))
        // A single room's channel.
        #expect(try await house.control(.roomChannel(room: "bath", channel: .mono)).room?.channel == .mono)
        #expect(try await channels(house, "bath") == [.mono])

        // A restarted house keeps the pair: each half is told its channel when it comes back.
        house = HouseHarness(configuration: configuration, clock: house.clock)
        for name in ["kl", "kr", "bath"] { try await house.connect(name) }
        #expect(try await channels(house, "kl") == [.left])
        #expect(try await channels(house, "kr") == [.right])
        #expect(try await channels(house, "bath") == [.mono])
        let rooms = try #require(try await house.control(.rooms).rooms)
        #expect(rooms.rooms.map(\.name) == ["bath", "Küche"] && rooms["Küche"]?.pair?.right.name == "kr" && rooms["Küche"]?.group == "Radio", "\(rooms)")

        // Unbound: two rooms again, each in stereo, in the pair's group.
        let unpaired = try #require(try await house.control(.unpair(room: "Küche")).rooms)
        #expect(unpaired.rooms.map(\.name) == ["bath", "kl", "kr"] && unpaired["kr"]?.group == "Radio", "\(unpaired)")
        #expect(try await channels(house, "kl") == [.stereo])
        #expect(try await channels(house, "kr") == [.stereo])
    }
}
