import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiDevices
import TuttiEngine
@_spi(Testing) @testable import TuttiPlayer
import TuttiTestSupport

/// The queue edited while it plays (AVQueuePlayer), the action at item end, forward playback
/// end times and `setRate(_:time:atHostTime:)`, each checked on the device's output sample by
/// sample. Every tone is a different sweep with no zero sample, so the output shows exactly
/// which frames of which item played, and where silence was inserted.
@Suite struct QueueEditingTests {
    let format = AudioFormat(sampleRate: 48000, channelCount: 2)

    /// Writes tones of the given lengths; returns their paths and exact samples.
    static func tones(_ seconds: [Double], in directory: TemporaryDirectory) -> [(path: String, tone: ToneWAV)] {
        seconds.enumerated().map { index, length in
            let tone = ToneWAV(seconds: length)
            let path = directory.file("tone-\(index).wav")
            _ = FileManager.default.createFile(atPath: path, contents: Data(tone.bytes))
            return (path, tone)
        }
    }

    static func statuses(_ events: [PlayerEvent]) -> [String] {
        events.compactMap { event in
            if case .status(let status, _, _) = event { return status.rawValue }
            return nil
        }
    }

    /// Inserting after the playing item, removing the next one and moving a later one, all
    /// while the first plays with the rest already decoded: the output is exactly the edited
    /// queue, joined gaplessly at the first changed boundary.
    @Test func editsWhilePlayingFlushFromTheFirstChangedBoundary() async throws {
        let directory = try TemporaryDirectory("queue-edit")
        defer { directory.remove() }
        // The first item lasts 2 s so the edits land while it plays even when the machine is
        // loaded (the events run on an ordinary thread and may come late).
        let media = Self.tones([2, 0.6, 0.7, 0.8, 0.4], in: directory)
        let (a, b, c, d) = (PlayerItem(path: media[0].path), PlayerItem(path: media[1].path), PlayerItem(path: media[2].path),
                            PlayerItem(path: media[3].path))
        let x = PlayerItem(path: media[4].path)
        let player = QueuePlayer(items: [a, b, c, d], outputFormat: format)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let edited = Mutex(false)
        let decodedAhead = Mutex(0)
        player.onEvent = { [weak player] event in
            guard case .status(.playing, _, _) = event, let player else { return }
            edited.withLock { done in
                guard !done else { return }
                done = true
                // The whole queue is decoded by now: the edits must flush audio already in the ring.
                decodedAhead.withLock { $0 = player.waitUntilDecoded(frames: 3 * 48000) }
                player.insert(x, after: a)
                player.remove(b)
                player.move(d, after: x)
            }
        }
        try player.play(on: device)
        let outcomes = try await onOwnThread { try player.waitUntilFinished() }

        #expect(decodedAhead.withLock { $0 } > media[0].tone.frameCount + media[1].tone.frameCount)
        #expect(player.items.map(\.id) == [a, x, d, c].map(\.id))
        #expect(outcomes.filter { $0.info != nil }.map(\.path) == [media[0].path, media[4].path, media[3].path, media[2].path])
        let output = try WAVFile(path: directory.file("out.wav")).samples
        let expected = media[0].tone.samples + media[4].tone.samples + media[3].tone.samples + media[2].tone.samples
        let kept = NetworkPlaybackTests.removingSilence(output)
        #expect(kept.count == expected.count)
        #expect(kept.elementsEqual(expected))
    }

    /// `advanceToNextItem()` cuts the playing item just ahead of the device and plays the next
    /// one whole; the item-end event tells how much of the cut item played.
    @Test func advanceCutsThePlayingItemAndPlaysTheNext() async throws {
        let directory = try TemporaryDirectory("queue-advance")
        defer { directory.remove() }
        let media = Self.tones([3, 0.5], in: directory)
        let player = QueuePlayer(items: media.map { PlayerItem(path: $0.path) }, outputFormat: format)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let advanced = Mutex(false)
        let events = Mutex<[PlayerEvent]>([])
        player.onEvent = { [weak player] event in
            events.withLock { $0.append(event) }
            guard case .status(.playing, _, _) = event, let player else { return }
            advanced.withLock { done in
                guard !done else { return }
                done = true
                player.advanceToNextItem()
            }
        }
        try player.play(on: device)
        _ = try await onOwnThread { try player.waitUntilFinished() }

        let output = NetworkPlaybackTests.removingSilence(try WAVFile(path: directory.file("out.wav")).samples)
        let second = media[1].tone.samples
        let played = output.count - second.count
        #expect(played > 0 && played < media[0].tone.samples.count / 2, "cut after \(played / 2) frames")
        #expect(output[..<played].elementsEqual(media[0].tone.samples[..<played]))
        #expect(output[played...].elementsEqual(second))
        let ends = events.withLock { $0 }.compactMap { event -> Int64? in
            if case .itemEnded(let item, _) = event { return item.frameCount }
            return nil
        }
        #expect(ends == [Int64(played / 2), Int64(media[1].tone.frameCount)])
    }

    /// An item's forward playback end time cuts it; the next item joins at the cut, gaplessly.
    @Test func forwardPlaybackEndTimeTrimsTheItem() throws {
        let directory = try TemporaryDirectory("queue-end-time")
        defer { directory.remove() }
        let media = Self.tones([1, 0.5], in: directory)
        let items = [PlayerItem(path: media[0].path, forwardPlaybackEndTime: MediaTime(value: 1, timescale: 4)), PlayerItem(path: media[1].path)]
        let player = QueuePlayer(items: items, outputFormat: format)
        let device = WAVFileDevice(clock: MonotonicClock(), path: directory.file("out.wav"), format: format)
        try player.play(on: device)
        let outcomes = try waitOnOwnThread("the player to finish") { try player.waitUntilFinished() }
        #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.error))")
        #expect(outcomes.map(\.frameCount) == [12000, Int64(media[1].tone.frameCount)])
        let output = try WAVFile(path: directory.file("out.wav")).samples
        let expected = Array(media[0].tone.samples[..<24000]) + media[1].tone.samples
        #expect(output.count == expected.count)
        #expect(output.elementsEqual(expected))
    }

    /// `actionAtItemEnd` pause stops at the exact end of the item with the rate at 0; resume
    /// plays the next item from its first frame. `none` holds with the rate kept until
    /// `advanceToNextItem()`.
    @Test(arguments: [ActionAtItemEnd.pause, .none])
    func actionAtItemEndStopsAtTheBoundary(action: ActionAtItemEnd) async throws {
        let directory = try TemporaryDirectory("queue-action-\(action.rawValue)")
        defer { directory.remove() }
        let media = Self.tones([0.4, 0.3], in: directory)
        var configuration = QueuePlayer.Configuration()
        configuration.actionAtItemEnd = action
        let player = QueuePlayer(items: media.map { PlayerItem(path: $0.path) }, outputFormat: format, configuration: configuration)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let events = Mutex<[PlayerEvent]>([])
        let rateAtStop = Mutex<Double?>(nil)
        player.onEvent = { [weak player] event in
            events.withLock { $0.append(event) }
            guard let player, case .itemEnded(let item, _) = event, item.tag == 0 else { return }
            // The first item has played to its end: the player waits there.
            rateAtStop.withLock { $0 = player.rate }
            if action == .pause { player.resume() } else { player.advanceToNextItem() }
        }
        try player.play(on: device)
        _ = try await onOwnThread { try player.waitUntilFinished() }

        #expect(rateAtStop.withLock { $0 } == (action == .pause ? 0 : 1))
        let statuses = Self.statuses(events.withLock { $0 })
        if action == .pause {
            #expect(statuses == ["waitingToPlayAtSpecifiedRate", "playing", "paused", "playing", "paused"], "\(statuses)")
        } else {
            #expect(statuses == ["waitingToPlayAtSpecifiedRate", "playing", "paused"], "\(statuses)")
        }
        let output = try WAVFile(path: directory.file("out.wav")).samples
        let runs = NetworkPlaybackTests.silentRuns(output)
        // One silence between the items, starting exactly at the first item's end.
        let inner = runs.filter { $0.lowerBound > 0 && $0.upperBound < output.count / 2 }
        #expect(inner.count == 1)
        #expect(inner.first?.lowerBound == (runs.first?.lowerBound == 0 ? runs[0].upperBound : 0) + media[0].tone.frameCount)
        #expect(NetworkPlaybackTests.removingSilence(output).elementsEqual(media[0].tone.samples + media[1].tone.samples))
    }

    /// With automatic waiting on, `setRate(_:time:atHostTime:)` refuses with a clear reason.
    @Test func setRateAtHostTimeNeedsAutomaticWaitingOff() throws {
        let player = QueuePlayer(items: [], outputFormat: format)
        #expect(throws: PlayerError.self) { try player.setRate(1, atHostTime: 0) }
        do {
            try player.setRate(1, atHostTime: 0)
        } catch {
            #expect(error.kind == .automaticWaitingIsOn)
            #expect(error.description.contains("automaticallyWaitsToMinimizeStalling"))
        }
    }

    /// Without automatic waiting, `setRate(1, time: t, atHostTime: h)` cues the item at `t`
    /// and the device emits that frame at `h`, to the frame, as its timing file shows.
    @Test func setRateAtHostTimePlaysTheCuedFrameAtThatTime() async throws {
        let directory = try TemporaryDirectory("queue-set-rate")
        defer { directory.remove() }
        let media = Self.tones([2], in: directory)
        var configuration = QueuePlayer.Configuration()
        configuration.automaticallyWaitsToMinimizeStalling = false
        let player = QueuePlayer(items: [PlayerItem(path: media[0].path)], outputFormat: format, configuration: configuration)
        let capture = directory.file("out.wav")
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: capture, format: format)
        let target = Mutex<Int64?>(nil)
        let failure = Mutex<PlayerError?>(nil)
        player.onEvent = { [weak player] event in
            guard case .status(.playing, _, _) = event, let player else { return }
            target.withLock { target in
                guard target == nil else { return }
                let hostTime = MonotonicClock().now() + 250_000_000
                target = hostTime
                do throws(PlayerError) {
                    try player.setRate(1, time: MediaTime(value: 1, timescale: 1), atHostTime: hostTime)
                } catch {
                    failure.withLock { $0 = error }
                }
            }
        }
        try player.play(on: device)
        _ = try await onOwnThread { try player.waitUntilFinished() }
        #expect(failure.withLock { $0 } == nil)
        let hostTime = try #require(target.withLock { $0 })

        let output = try WAVFile(path: capture).samples
        let tone = media[0].tone.samples
        let runs = NetworkPlaybackTests.silentRuns(output).filter { $0.lowerBound > 0 && $0.upperBound < output.count / 2 }
        try #require(runs.count == 1, "\(runs)")
        let resumed = runs[0].upperBound
        // Before the silence: the tone from its start; after it: the tone from 1 s, to its end.
        #expect(output[..<(runs[0].lowerBound * 2)].elementsEqual(tone[..<(runs[0].lowerBound * 2)]))
        #expect(output[(resumed * 2)...].elementsEqual(tone[(48000 * 2)...]))
        // The timing file: when did device frame `resumed` leave the DAC?
        let timing = try VirtualCapture(path: capture)
        let emitted = Int64(timing.emissionTime(ofFrame: Double(resumed)).rounded())
        #expect(abs(emitted - hostTime) <= 20_834, "frame \(resumed) emitted \(emitted - hostTime) ns from the requested host time")
    }
}
