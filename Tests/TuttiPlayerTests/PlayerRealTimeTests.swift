import CAllocationCounter
import Synchronization
import Testing
import TuttiCore
@_spi(Testing) import TuttiDevices
import TuttiEngine
@testable import TuttiPlayer
import TuttiTestSupport

/// The player on a real-time virtual device: the whole render path (ring, source, device,
/// capture hand-off) runs on the device thread with no allocation, while a real file decodes.
@Suite struct PlayerRealTimeTests {
    @Test func renderThreadDoesNotAllocateWhilePlayingAFile() async throws {
        let directory = try TemporaryDirectory("rt-player")
        defer { directory.remove() }
        let input = directory.file("in.mp3")
        try TestMedia.generateTone(input, seconds: 1.5, sampleRate: 44100, codecArguments: ["-c:a", "libmp3lame"])
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: input)], outputFormat: format)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let counter = AllocationProbe()
        device.renderLoopObserver = counter.observer
        try player.play(on: device)
        let outcomes = try await onOwnThread("the player to finish") { try player.waitUntilFinished() }
        #expect(outcomes.first?.error == nil)
        #expect(device.underrunCount == 0)
        #expect(counter.allocations == 0)
        // And what it emitted is the file, converted once.
        let output = try WAVFile(path: directory.file("out.wav"))
        #expect(abs(output.frameCount - 72000) <= 1)
    }

    /// The same through everything that reaches into the render thread: a ring truncated by an
    /// edit (the fence), a stop at an item's end, a change of rate scheduled at a device frame,
    /// and an advance.
    @Test func renderThreadDoesNotAllocateThroughEditsStopsAndScheduledStarts() async throws {
        let directory = try TemporaryDirectory("rt-player-edits")
        defer { directory.remove() }
        let media = QueueEditingTests.tones([0.6, 0.5, 1.5], in: directory)
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        var configuration = QueuePlayer.Configuration()
        configuration.actionAtItemEnd = .pause
        configuration.automaticallyWaitsToMinimizeStalling = false
        let (a, b, c) = (PlayerItem(path: media[0].path), PlayerItem(path: media[1].path), PlayerItem(path: media[2].path))
        let player = QueuePlayer(items: [a, b], outputFormat: format, configuration: configuration)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let counter = AllocationProbe()
        device.renderLoopObserver = counter.observer
        let steps = Mutex<[String]>([])
        player.onEvent = { [weak player] event in
            guard let player else { return }
            steps.withLock { steps in
                switch event {
                case .status(.playing, _, _) where steps.isEmpty:
                    steps.append("insert")
                    player.insert(c, after: a)
                case .itemEnded(let item, _) where item.tag == 0 && steps == ["insert"]:
                    steps.append("scheduled play")
                    try? player.setRate(1, atHostTime: MonotonicClock().now() + 100_000_000)
                case .itemStarted(let item, _) where item.tag == 2 && steps == ["insert", "scheduled play"]:
                    steps.append("advance")
                    player.advanceToNextItem()
                default: break
                }
            }
        }
        try player.play(on: device)
        _ = try await onOwnThread { try player.waitUntilFinished() }
        #expect(steps.withLock { $0 } == ["insert", "scheduled play", "advance"])
        #expect(counter.allocations == 0)
        // A, then part of C (cut by the advance), then B: each exactly, in that order.
        let output = NetworkPlaybackTests.removingSilence(try WAVFile(path: directory.file("out.wav")).samples)
        let (first, second, last) = (media[0].tone.samples, media[2].tone.samples, media[1].tone.samples)
        let played = output.count - first.count - last.count
        #expect(played > 0 && played < second.count)
        #expect(output[..<first.count].elementsEqual(first))
        #expect(output[first.count..<(first.count + played)].elementsEqual(second[..<played]))
        #expect(output[(first.count + played)...].elementsEqual(last))
    }
}

final class AllocationProbe: Sendable {
    private let count = Atomic<Int64>(-1)
    var observer: RenderLoopObserver {
        RenderLoopObserver(didEnter: { tutti_alloc_track_begin() },
                           willExit: { [self] in self.count.store(tutti_alloc_track_end(), ordering: .releasing) })
    }
    var allocations: Int64 { count.load(ordering: .acquiring) }
}
