import CAllocationCounter
import Synchronization
import Testing
import TuttiCore
import TuttiDevices
import TuttiTestSupport
@testable import TuttiPlayback

/// The player on a real-time virtual device: the whole render path (ring, source, device,
/// capture hand-off) runs on the device thread with no allocation, while a real file decodes.
@Suite struct PlayerRealTimeTests {
    @Test func renderThreadDoesNotAllocateWhilePlayingAFile() throws {
        let directory = try TemporaryDirectory("rt-player")
        defer { directory.remove() }
        let input = directory.file("in.mp3")
        try TestMedia.generateTone(input, seconds: 1.5, sampleRate: 44100, codecArguments: ["-c:a", "libmp3lame"])
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: input)], outputFormat: format)
        let device = VirtualDevice(capturePath: directory.file("out.wav"), format: format)
        let counter = AllocationProbe()
        device.renderLoopObserver = counter.observer
        try player.play(on: device)
        let outcomes = try player.waitUntilFinished()
        #expect(outcomes.first?.error == nil)
        #expect(device.underrunCount == 0)
        #expect(counter.allocations == 0)
        // And what it emitted is the file, converted once.
        let output = try WAVFile(path: directory.file("out.wav"))
        #expect(abs(output.frameCount - 72000) <= 1)
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
