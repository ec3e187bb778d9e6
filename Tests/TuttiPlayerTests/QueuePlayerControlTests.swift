import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiDevices
@testable import TuttiPlayer
import TuttiTestSupport

/// Pause and resume, observers as async sequences, and the timebase through them, on a paced
/// virtual device with the output checked sample by sample.
@Suite struct QueuePlayerControlTests {
    /// Pausing stops the timeline in place: the output is the signal with one silence inserted,
    /// nothing lost or repeated; the observers and events follow the queue's time, not the device's.
    @Test func pauseAndResumeKeepTheTimelineExact() async throws {
        let directory = try TemporaryDirectory("player-pause")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 2)
        let input = directory.file("tone.wav")
        _ = FileManager.default.createFile(atPath: input, contents: Data(tone.bytes))
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: input)], outputFormat: format)
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: format)
        let events = player.events()
        let boundaries = player.boundaryTimes([MediaTime(value: 1, timescale: 2), MediaTime(value: 3, timescale: 2)])
        let periodic = player.periodicTimes(interval: MediaTime(value: 1, timescale: 2))
        // Control from the player's own event callback: it runs in step with playback, while
        // the async sequences below are only read afterwards (the shared concurrency pool may be
        // busy with other tests for seconds).
        let steps = Mutex(0)
        player.onEvent = { [weak player] event in
            guard case .status(let status, _, _) = event else { return }
            steps.withLock { step in
                guard let player else { return }
                if status == .playing && step == 0 { step = 1; player.pause() }
                if status == .paused && step == 1 {
                    step = 2
                    #expect(player.rate == 0 && player.timebaseRate == 0)
                    player.resume()
                }
            }
        }
        try player.play(on: device)
        let outcomes = try await onOwnThread { try player.waitUntilFinished() }
        #expect(outcomes.first?.error == nil)

        let statuses = try await collect(events, "the player's events").compactMap { event -> String? in
            if case .status(let status, _, _) = event { status.rawValue } else { nil }
        }
        let heard = try await collect(boundaries, "the boundary times")
        let ticks = try await collect(periodic, "the periodic times")

        #expect(heard == [MediaTime(value: 1, timescale: 2), MediaTime(value: 3, timescale: 2)])
        #expect(ticks == (0...4).map { MediaTime(value: Int64($0), timescale: 2) })
        #expect(statuses == ["waitingToPlayAtSpecifiedRate", "playing", "paused", "playing", "paused"], "\(statuses)")
        let output = try WAVFile(path: directory.file("out.wav")).samples
        let kept = NetworkPlaybackTests.removingSilence(output)
        #expect(NetworkPlaybackTests.silentRuns(output).count == 1)
        #expect(kept.count == tone.samples.count)
        #expect(kept.elementsEqual(tone.samples))
    }
}
