import Foundation
import NIOCore
import Testing
import TuttiCore
import TuttiMedia
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// A live source (`LiveInput`, what an AirPlay sender reaches a group through) on the house's
/// manual clock: where the group anchors it, how it follows a source clock that runs fast, what
/// a flush does, and the queue coming back paused when it ends. Every message the room is sent
/// is inspected.
@Suite struct HouseLiveSourceTests {
    static let rate = 48000
    static let packet = 352

    /// A source whose clock runs `ppm` fast against the house's: source frame `s` is heard at
    /// `start + s / (rate × (1 + ppm))` house seconds, and arrives `latency` before that.
    struct Source {
        var start: Int64
        var ppm: Double
        var latency: Int64 = 2_000_000_000
        /// The frame numbers start far from 0, as RTP's do.
        var firstFrame: Int64 = 1_000_000

        func heardAt(_ frame: Int64) -> Int64 {
            start + Int64((Double(frame - firstFrame) * 1e9 / (Double(HouseLiveSourceTests.rate) * (1 + ppm * 1e-6))).rounded())
        }

        /// A ramp that never repeats within a minute, the same in both channels: frame `f` is
        /// `((f mod 48 000) − 24 000) / 32 768`, exact in FLAC's 24 bits.
        static func samples(from frame: Int64, count: Int) -> [Float] {
            (0..<count).flatMap { i -> [Float] in
                let value = Float(Int((frame + Int64(i)) % 48000) - 24000) / 32768
                return [value, value]
            }
        }
    }

    /// Feeds `source`'s packets up to `until` (source frames from its first), advancing the
    /// house's clock to each one's arrival, with a schedule point every second; `mono`: its
    /// left channel alone.
    func feed(_ input: LiveInput, _ source: Source, from: Int64 = 0, until: Int64, mono: Bool = false, harness: HouseHarness) async {
        var frame = source.firstFrame + from
        var lastStep = harness.clock.now()
        while frame < source.firstFrame + until {
            let arrival = source.heardAt(frame) - source.latency
            if arrival > harness.clock.now() { harness.clock.set(to: arrival) }
            if (frame - source.firstFrame) % Int64(Self.rate) < Int64(Self.packet) { input.schedule(sourceFrame: frame, hostTime: source.heardAt(frame)) }
            let samples = Source.samples(from: frame, count: Self.packet)
            input.audio(mono ? stride(from: 0, to: samples.count, by: 2).map { samples[$0] } : samples, frames: Self.packet, sourceFrame: frame)
            frame += Int64(Self.packet)
            if harness.clock.now() - lastStep > 50_000_000 {
                await harness.loop.run()
                lastStep = harness.clock.now()
            }
        }
        await harness.loop.run()
    }

    func info() -> LiveSourceInfo {
        LiveSourceInfo(kind: "airplay", sender: "192.0.2.7", senderName: "Phone", sampleRate: Self.rate, channelCount: 2)
    }

    @Test(.timeLimit(.minutes(2)))
    func aLiveSourceIsHeardWhenItsScheduleSaysAndFollowsItsFastClock() async throws {
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        let directory = try TemporaryDirectory("house-live")
        defer { directory.remove() }
        let queued = directory.file("queued.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:d=20", "-ac", "2", "-ar", "48000", queued])
        _ = try await harness.control(.play(files: [queued]))
        harness.clock.advance(by: 3_000_000_000)
        await harness.loop.run()
        let queueStream = try #require(try await harness.onLoop { $0.defaultGroup.stream?.id })

        let input = LiveInput(house: harness.house)
        input.began(info())
        input.metadata(title: "Live Tune", artist: "Someone", album: nil)
        let source = Source(start: harness.clock.now() + 2_000_000_000, ppm: 100)
        await feed(input, source, until: Int64(Self.rate) * 60, harness: harness)

        let messages = try await harness.messages("kitchen")
        // The queue's stream was dropped, and the live one started at its first frame, heard
        // when the source asked.
        #expect(messages.contains(.flush(.init(streamID: queueStream, fromFrame: .min))))
        let live = try #require(messages.compactMap { if case .streamStart(let s) = $0, s.streamID != queueStream { s } else { nil } }.first)
        let anchors = messages.compactMap { if case .anchor(let a) = $0, a.streamID == live.streamID { a } else { nil } }
        #expect(anchors.first == .init(streamID: live.streamID, timelineFrame: 0, serverTime: source.start, isPlaying: true), "\(anchors)")
        // The first ten seconds, before the drift reaches the deadband, are the source's samples
        // exactly (a rate of exactly 1), at the timeline frames its schedule puts them.
        let heard = try HouseHarness.audio(messages, stream: live.streamID, from: 0, frames: Self.rate * 8)
        let expected = Source.samples(from: source.firstFrame, count: Self.rate * 8)
        let differing = zip(heard, expected).filter { abs($0 - $1) > 1e-6 }.count
        #expect(differing == 0, "\(differing) of \(expected.count) samples differ")
        // After close to a minute at 100 ppm fast (5.5 ms of drift uncorrected), what the room is
        // to hear at each timeline frame is the source frame the schedule puts there, within the
        // deadband and the correction's settling: read off the ramp, whose value says its frame.
        let late = Int64(Self.rate) * 55
        let window = try HouseHarness.audio(messages, stream: live.streamID, from: late, frames: Self.rate)
        var checked = 0
        for offset in stride(from: 0, to: Self.rate, by: 4800) {
            let frame = late + Int64(offset)
            // The source frame heard at the frame's time, modulo the ramp's period.
            let wanted = Double(source.firstFrame % 48000) + Double(frame) * (1 + source.ppm * 1e-6)
            let expected = wanted.truncatingRemainder(dividingBy: 48000)
            // Away from the ramp's wrap, where interpolation rings.
            guard expected > 2000 && expected < 46000 else { continue }
            let heardFrame = Double(window[2 * offset]) * 32768 + 24000
            #expect(abs(heardFrame - expected) < Double(Self.rate) * 0.0015, "at timeline frame \(frame) the room hears source frame …\(heardFrame), the schedule says …\(expected)")
            checked += 1
        }
        #expect(checked >= 5)
        // The status names the source and what it plays, where it is in it (as the source last
        // said, moved on by the house's clock) and that it sent a cover, which the house gives.
        input.progress(positionSeconds: 12, durationSeconds: 200)
        input.artwork([0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3], type: "image/jpeg")
        await harness.loop.run()
        harness.clock.advance(by: 1_500_000_000)
        let status = try #require(try await harness.control(.status).status)
        #expect(status.source?.sender == "192.0.2.7" && status.title == "Live Tune" && status.artist == "Someone" && status.state == "playing")
        #expect(status.itemPositionSeconds == 13.5 && status.itemDurationSeconds == 200, "\(String(describing: status.itemPositionSeconds)) of \(String(describing: status.itemDurationSeconds))")
        #expect(status.source?.artworkRevision == 1)
        let cover = try await harness.house.liveArtwork(group: "default").get()
        #expect(cover.bytes == [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3] && cover.mimeType == "image/jpeg")
        if case .success = await harness.house.liveArtwork(group: "Nowhere") { Issue.record("a cover for a group that does not exist") }
        // A controller cannot seek it.
        await #expect(throws: (any Error).self) { _ = try await harness.control(.seek(seconds: 1)) }

        // The source ends: what it sent plays out, then the queue is back, paused where it was.
        input.ended("TEARDOWN")
        await harness.loop.run()
        // The loop's timers run on its own time, which the test moves with the clock.
        let wait = source.heardAt(source.firstFrame + Int64(Self.rate) * 60) + 200_000_000 - harness.clock.now()
        harness.clock.advance(by: wait)
        await harness.loop.advanceTime(by: .nanoseconds(wait))
        // The queue's producer thread takes up its item.
        try await harness.runLoop(until: "the queue's item is back") { $0.defaultGroup.liveStream == nil && $0.defaultGroup.currentItem != nil }
        let back = try #require(try await harness.control(.status).status)
        #expect(back.source == nil && back.state == "paused" && back.item == 0, "\(back)")
        #expect(abs((back.itemPositionSeconds ?? 0) - 3) < 0.2, "the queue came back at \(String(describing: back.itemPositionSeconds)) s, paused at about 3 s")
        // Audio the source sends after it ended reaches no room.
        _ = try await harness.messages("kitchen")
        for packet in 0..<20 {
            input.audio(Source.samples(from: Int64(packet * Self.packet), count: Self.packet), frames: Self.packet, sourceFrame: Int64(packet * Self.packet))
        }
        input.schedule(sourceFrame: 0, hostTime: harness.clock.now() + 2_000_000_000)
        await harness.loop.run()
        let afterEnd = try await harness.messages("kitchen")
        #expect(!afterEnd.contains { if case .audioChunk(let chunk) = $0 { chunk.streamID == live.streamID } else { false } })
        #expect(!afterEnd.contains { if case .anchor(let anchor) = $0 { anchor.streamID == live.streamID } else { false } })
    }

    @Test(.timeLimit(.minutes(1)))
    func aFlushStopsTheRoomsAndTheNextAudioIsHeardWhenItsNewScheduleSays() async throws {
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        let input = LiveInput(house: harness.house)
        input.began(info())
        var source = Source(start: harness.clock.now() + 2_000_000_000, ppm: 0)
        await feed(input, source, until: Int64(Self.rate) * 5, harness: harness)
        // The sender pauses 3 s into what is heard, and resumes 4 s later from another frame.
        harness.clock.set(to: source.start + 3_000_000_000)
        await harness.loop.run()
        input.flushed()
        await harness.loop.run()
        let before = try await harness.messages("kitchen")
        let stream = try #require(before.compactMap { if case .streamStart(let s) = $0 { s.streamID } else { nil } }.first)
        let pause = try #require(before.compactMap { if case .anchor(let a) = $0, !a.isPlaying { a } else { nil } }.last)
        let lead = harness.house.configuration.editLeadNanoseconds
        #expect(pause.serverTime == harness.clock.now() + lead, "\(pause)")
        #expect(pause.timelineFrame == Int64(Self.rate) * 3 + lead * Int64(Self.rate) / 1_000_000_000, "\(pause)")
        let flush = try #require(before.compactMap { if case .flush(let f) = $0, f.streamID == stream { f } else { nil } }.last)
        #expect(flush.fromFrame == pause.timelineFrame)

        harness.clock.advance(by: 2_000_000_000)
        source = Source(start: harness.clock.now() + 2_000_000_000, ppm: 0, firstFrame: 5_000_000)
        await feed(input, source, until: Int64(Self.rate) * 2, harness: harness)
        let after = try await harness.messages("kitchen")
        let resumed = try #require(after.compactMap { if case .anchor(let a) = $0, a.isPlaying { a } else { nil } }.first)
        #expect(resumed == .init(streamID: stream, timelineFrame: pause.timelineFrame, serverTime: source.start, isPlaying: true))
        // What follows the flush frame is the new audio, from its first frame.
        let heard = try HouseHarness.audio(before + after, stream: stream, from: pause.timelineFrame, frames: Self.rate)
        let expected = Source.samples(from: source.firstFrame, count: Self.rate)
        #expect(zip(heard, expected).filter { abs($0 - $1) > 1e-6 }.count == 0)
    }

    /// A controller takes the group back: `pause` stops every room on one frame and brings the
    /// queue back paused, at the item it was on even after the queue was edited meanwhile;
    /// `resume` then plays the queue.
    @Test(.timeLimit(.minutes(1)))
    func aControllerTakesTheGroupBackAndTheQueueComesBackWhereItWas() async throws {
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        let directory = try TemporaryDirectory("house-live-back")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:d=4", "-ac", "2", "-ar", "48000", a])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=660:d=20", "-ac", "2", "-ar", "48000", b])
        _ = try await harness.control(.play(files: [a, b]))
        // b plays, 2 s in.
        try await harness.runLoop(until: "the queue is produced past b's start") { $0.defaultGroup.stream.map { $0.producedEnd > 48000 * 7 } ?? false }
        harness.clock.advance(by: 6_050_000_000)
        await harness.loop.run()
        #expect(try await harness.control(.status).status?.item == 1)

        let input = LiveInput(house: harness.house)
        input.began(LiveSourceInfo(kind: "airplay", sender: "192.0.2.9", senderName: nil, sampleRate: Self.rate, channelCount: 1))
        let source = Source(start: harness.clock.now() + 2_000_000_000, ppm: 0)
        // A mono sender: heard in both channels (fed here as one channel).
        let fed = Int64(Self.rate) * 4
        await feed(input, source, until: fed, mono: true, harness: harness)
        let messages = try await harness.messages("kitchen")
        let live = try #require(try await harness.onLoop { $0.defaultGroup.liveStream?.id })
        let heard = try HouseHarness.audio(messages, stream: live, from: 0, frames: Self.rate)
        let expected = Source.samples(from: source.firstFrame, count: Self.rate)
        #expect(zip(heard, expected).filter { abs($0 - $1) > 1e-6 }.count == 0, "the mono sender is not heard in both channels")

        // The queue is edited meanwhile: a is removed, so b is item 0.
        _ = try await harness.control(.queueRemove(index: 0))
        await #expect(throws: (any Error).self) { _ = try await harness.control(.next) }
        let pauseNow = harness.clock.now()
        let paused = try #require(try await harness.control(.pause).paused)
        #expect(paused.pausedAtSeconds > 0)
        let stops = try await harness.messages("kitchen").compactMap { if case .anchor(let a) = $0, a.streamID == live, !a.isPlaying { a } else { nil } }
        #expect(stops.count == 1, "every room stops on one frame: \(stops)")
        let stopTime = try #require(stops.first?.serverTime)
        // The loop's timers run on its own time, which the test moves with the clock.
        let wait = stopTime - pauseNow + 200_000_000
        harness.clock.advance(by: wait)
        await harness.loop.advanceTime(by: .nanoseconds(wait))
        try await harness.runLoop(until: "the queue's item is back") { $0.defaultGroup.liveStream == nil && $0.defaultGroup.currentItem != nil }
        let back = try #require(try await harness.control(.status).status)
        #expect(back.source == nil && back.state == "paused" && back.item == 0 && back.path == b, "\(back)")
        #expect(abs((back.itemPositionSeconds ?? 0) - 2.0) < 0.2, "b came back at \(String(describing: back.itemPositionSeconds)) s")
        // Audio the sender goes on sending is dropped; resume plays the queue.
        input.audio([Float](repeating: 0.5, count: Self.packet), frames: Self.packet, sourceFrame: source.firstFrame + fed)
        await harness.loop.run()
        #expect(try await harness.onLoop { $0.defaultGroup.liveStream == nil })
        #expect(try await harness.control(.resume).resumed != nil)
    }
}
