import Foundation
import Testing
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// The play modes (repeat, random, single, consume), queue shuffle and stored playlists, on the
/// house driven by `HouseHarness`: each is checked in the audio the rooms are sent, sample by
/// sample against ffmpeg's decode of the items, or by each stretch's tone.
@Suite(.serialized) struct HousePlayModesTests {
    static let frequencies = [300, 420, 540, 660, 780]

    /// Tones of `seconds` each, one per frequency.
    static func tones(_ directory: TemporaryDirectory, count: Int, seconds: Double) throws -> [String] {
        try (0..<count).map { index in
            let path = directory.file("tone\(index).flac")
            try HouseFlushTests.tone(path, seconds: seconds, frequency: frequencies[index])
            return path
        }
    }

    /// The tone of channel 0 over `frames` from `start`, from its zero crossings.
    static func frequency(_ audio: [Float], from start: Int, frames: Int) -> Double {
        var crossings = 0
        for index in start..<(start + frames - 1) where (audio[2 * index] < 0) != (audio[2 * (index + 1)] < 0) { crossings += 1 }
        return Double(crossings) / 2 / (Double(frames) / 48000)
    }

    /// The nearest test tone to `frequency`.
    static func tone(_ frequency: Double) -> Int {
        frequencies.min { abs(Double($0) - frequency) < abs(Double($1) - frequency) }!
    }

    /// Runs the loop until the group's rooms have been sent the stream to `frame`. (Not until it
    /// was produced there: the producer thread's note that it was hops to the loop, so a test
    /// that read the rooms' messages then could miss the last chunks.)
    static func produced(_ harness: HouseHarness, to frame: Int64) async throws {
        try await harness.runLoop(until: "the rooms sent the stream to frame \(frame)") { house in
            let group = house.defaultGroup
            guard let stream = group.stream, !group.rooms.isEmpty else { return false }
            return group.rooms.allSatisfy { $0.sender.streamID == stream.id && $0.sender.sentUntilFrame >= frame }
        }
    }

    /// Repeat turned on before the queue's end is heard continues the stream into the first
    /// item there, seamlessly; turned off, the stream ends after the pass being heard.
    @Test func repeatContinuesIntoTheFirstItemAndStopsWhenTurnedOff() async throws {
        let directory = try TemporaryDirectory("house-repeat")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 2, seconds: 1)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: files))
        let stream = try await harness.waitForProduction()
        #expect(stream.endFrame == 96000)

        let status = try await harness.control(.playModes(repeat: true)).status!
        #expect(status.playModes == PlayModes(repeat: true) && status.nextItem == 1)
        try await Self.produced(harness, to: 4 * 48000)
        #expect(try await harness.onLoop { $0.defaultGroup.stream?.endFrame } == nil)
        let sent = try await harness.messages("kitchen")
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: 4 * 48000)
        let a = try TestMedia.decodeWithFFmpeg(files[0]), b = try TestMedia.decodeWithFFmpeg(files[1])
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, a + b + a + b) < 1e-5)
        // Nothing heard is cut: at most the stream's old end is (a flush from there, where nothing was).
        #expect(sent.allSatisfy { if case .flush(let flush) = $0 { flush.fromFrame >= 96000 } else { true } }, "repeat cut what was heard")

        // Off while the first pass is heard: the stream ends where the second pass began.
        _ = try await harness.control(.playModes(repeat: false))
        let ended = try await harness.waitForProduction()
        #expect(ended.id == stream.id && ended.endFrame == 96000)
    }

    /// Random plays every item once, in the shuffled order the house keeps (and reports as the
    /// next item); the same seed shuffles the same way.
    @Test func randomPlaysEveryItemOnceInTheKeptOrder() async throws {
        let directory = try TemporaryDirectory("house-random")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 5, seconds: 0.5)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.playModes(random: true))
        _ = try await harness.control(.play(files: files))
        let stream = try await harness.waitForProduction()
        let end = stream.endFrame
        #expect(end == Int64(5 * 24000))
        let order = try await harness.onLoop { house in house.defaultGroup.randomOrder.map { house.defaultGroup.tags.firstIndex(of: $0)! } }
        #expect(order.sorted() == [0, 1, 2, 3, 4] && order != [0, 1, 2, 3, 4], "\(order)")
        let audio = try HouseHarness.audio(try await harness.messages("kitchen"), stream: stream.id, from: 0, frames: 5 * 24000)
        // Each item's tone, away from the seams.
        let heard = (0..<5).map { Self.tone(Self.frequency(audio, from: $0 * 24000 + 2400, frames: 19200)) }
        print("random: order \(order), tones heard \(heard)")
        #expect(heard == order.map { Self.frequencies[$0] })
        let status = try await harness.control(.status).status!
        #expect(status.item == order[0] && status.nextItem == order[1])

        // The same seed (the clock's start) gives the same order.
        let again = HouseHarness()
        try await again.connect("kitchen")
        _ = try await again.control(.playModes(random: true))
        _ = try await again.control(.play(files: files))
        #expect(try await again.onLoop { house in house.defaultGroup.randomOrder.map { house.defaultGroup.tags.firstIndex(of: $0)! } } == order)
    }

    /// Single ends the stream after the item heard; with repeat it plays that item again and
    /// again.
    @Test func singleStopsAfterTheItemAndLoopsItWithRepeat() async throws {
        let directory = try TemporaryDirectory("house-single")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 2, seconds: 1)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.playModes(single: true))
        _ = try await harness.control(.play(files: files))
        let stream = try await harness.waitForProduction()
        #expect(stream.endFrame == 48000)
        #expect(try await harness.control(.status).status!.nextItem == nil)

        _ = try await harness.control(.playModes(repeat: true))
        try await Self.produced(harness, to: 3 * 48000)
        let audio = try HouseHarness.audio(try await harness.messages("kitchen"), stream: stream.id, from: 0, frames: 3 * 48000)
        let a = try TestMedia.decodeWithFFmpeg(files[0])
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, a + a + a) < 1e-5)
        #expect(try await harness.control(.status).status!.nextItem == 0)
    }

    /// Consume removes an item once the playhead has left it, and the last one when the stream
    /// ends; what is heard is untouched.
    @Test func consumeRemovesEachItemOnceHeard() async throws {
        let directory = try TemporaryDirectory("house-consume")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 3, seconds: 1)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.playModes(consume: true))
        _ = try await harness.control(.play(files: files))
        let stream = try await harness.waitForProduction()
        let delay = House.Configuration().startDelayNanoseconds
        func heard(seconds: Double) async throws {
            harness.clock.advance(by: 1_000_000_000 + delay + Int64(seconds * 1e9) - harness.clock.now())
            // The look for consumed items runs on the loop's own (testing) time.
            await harness.loop.advanceTime(by: .milliseconds(400))
        }
        try await heard(seconds: 0.5)
        #expect(try await harness.onLoop { $0.defaultGroup.queue } == files)
        try await heard(seconds: 1.5)
        try await harness.runLoop(until: "item 1 consumed") { $0.defaultGroup.queue == Array(files[1...]) }
        try await heard(seconds: 3.5)
        try await harness.runLoop(until: "every item consumed") { $0.defaultGroup.queue.isEmpty }
        let audio = try HouseHarness.audio(try await harness.messages("kitchen"), stream: stream.id, from: 0, frames: 3 * 48000)
        let reference = try files.flatMap { try TestMedia.decodeWithFFmpeg($0) }
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
    }

    /// Shuffle keeps the item heard first and playing; the rest follow in a new order, and the
    /// stream is cut only after the item heard.
    @Test func shuffleKeepsTheItemHeardFirst() async throws {
        let directory = try TemporaryDirectory("house-shuffle")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 5, seconds: 1)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: files))
        let stream = try await harness.waitForProduction()
        harness.clock.advance(by: House.Configuration().startDelayNanoseconds + 1_500_000_000)
        let shuffled = try await harness.control(.queueShuffle).edited!
        let queue = try await harness.onLoop { $0.defaultGroup.queue }
        #expect(queue[0] == files[1] && Set(queue) == Set(files) && queue != files, "\(queue)")
        #expect(shuffled.cut.map { $0.fromSeconds >= 2 } ?? true)
        _ = try await harness.waitForProduction()
        let audio = try HouseHarness.audio(try await harness.messages("kitchen"), stream: stream.id, from: 0, frames: 6 * 48000)
        let heard = (0..<6).map { Self.tone(Self.frequency(audio, from: $0 * 48000 + 4800, frames: 38400)) }
        // The first item, then the shuffled queue from the item heard (the second) on.
        let expected = [files[0]] + queue
        #expect(heard == expected.map { Self.frequencies[files.firstIndex(of: $0)!] }, "\(heard)")
    }

    /// Stored playlists: saved from the queue, loaded onto its end, removed; they and the play
    /// modes survive a restart of the house.
    @Test func storedPlaylistsAndModesSurviveARestart() async throws {
        let directory = try TemporaryDirectory("house-playlists")
        defer { directory.remove() }
        let files = try Self.tones(directory, count: 2, seconds: 1)
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let harness = HouseHarness(configuration: configuration)
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: files))
        let saved = try await harness.control(.playlistSave(name: "Sunday")).playlists!
        #expect(saved.playlists.map(\.name) == ["Sunday"] && saved.playlists[0].files == files)
        _ = try await harness.control(.queueClear)
        _ = try await harness.control(.playlistLoad(name: "Sunday"))
        _ = try await harness.control(.playlistLoad(name: "Sunday"))
        #expect(try await harness.onLoop { $0.defaultGroup.queue } == files + files)
        await #expect(throws: TestFailure.self) { _ = try await harness.control(.playlistLoad(name: "Monday")) }
        _ = try await harness.control(.playlistSave(name: "Monday"))
        _ = try await harness.control(.playModes(repeat: true, consume: true))

        let restarted = HouseHarness(configuration: configuration, clock: harness.clock)
        let kept = try await restarted.control(.playlists).playlists!
        #expect(kept.playlists.map(\.name) == ["Monday", "Sunday"] && kept.playlists[0].files == files + files)
        #expect(try await restarted.control(.status).status!.playModes == PlayModes(repeat: true, consume: true))
        let left = try await restarted.control(.playlistRemove(name: "Sunday")).playlists!
        #expect(left.playlists.map(\.name) == ["Monday"])
        // playlist-add: files appended (MPD's playlistadd), a playlist made for a new name, and
        // a file the house cannot play refused with nothing added.
        let appended = try await restarted.control(.playlistAdd(name: "Monday", files: [files[0]])).playlists!
        #expect(appended.playlists.first { $0.name == "Monday" }?.files == files + files + [files[0]])
        let made = try await restarted.control(.playlistAdd(name: "Tuesday", files: files)).playlists!
        #expect(made.playlists.first { $0.name == "Tuesday" }?.files == files)
        await #expect(throws: TestFailure.self) { _ = try await restarted.control(.playlistAdd(name: "Tuesday", files: [directory.file("missing.flac")])) }
        #expect(try await restarted.control(.playlists).playlists!.playlists.first { $0.name == "Tuesday" }?.files == files)
    }
}
