import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiDevices
import TuttiEngine
@testable import TuttiPlayer
import TuttiSimulation
import TuttiTestSupport

/// The player on HTTP sources served by a real server on loopback that throttles and stalls:
/// automatic waiting, stall recovery, and range seeking, checked on the emitted audio.
@Suite struct NetworkPlaybackTests {
    struct Played: Sendable {
        var output: [Float]
        var events: [PlayerEvent]
        var outcomes: [ItemOutcome]
        var playCalledAt: Int64
    }

    static func play(_ url: String, configuration: QueuePlayer.Configuration = QueuePlayer.Configuration(),
                     directory: TemporaryDirectory, offline: Bool = false) async throws -> Played {
        var withNetwork = configuration
        withNetwork.network = TestNetwork.opener
        let configuration = withNetwork
        return try await onOwnThread("playing \(url)") {
            let format = AudioFormat(sampleRate: 48000, channelCount: 2)
            let player = QueuePlayer(items: [PlayerItem(path: url)], outputFormat: format, configuration: configuration)
            let events = Mutex<[PlayerEvent]>([])
            player.onEvent = { event in events.withLock { $0.append(event) } }
            let capture = directory.file("out.wav")
            let device: any OutputDevice = offline ? WAVFileDevice(clock: MonotonicClock(), path: capture, format: format)
                                                   : VirtualDevice(clock: MonotonicClock(), capturePath: capture, format: format)
            let start = MonotonicClock().now()
            try player.play(on: device)
            let outcomes = try player.waitUntilFinished()
            return Played(output: try WAVFile(path: capture).samples, events: events.withLock { $0 }, outcomes: outcomes, playCalledAt: start)
        }
    }

    /// Runs of exactly silent frames in a stereo capture, as frame ranges.
    static func silentRuns(_ samples: [Float]) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var start: Int? = nil
        let frames = samples.count / 2
        for frame in 0...frames {
            let silent = frame < frames && samples[2 * frame] == 0 && samples[2 * frame + 1] == 0
            if silent, start == nil { start = frame }
            if !silent, let s = start { runs.append(s..<frame); start = nil }
        }
        return runs
    }

    static func removingSilence(_ samples: [Float]) -> [Float] {
        var kept: [Float] = []
        kept.reserveCapacity(samples.count)
        for frame in 0..<samples.count / 2 where !(samples[2 * frame] == 0 && samples[2 * frame + 1] == 0) {
            kept.append(samples[2 * frame])
            kept.append(samples[2 * frame + 1])
        }
        return kept
    }

    static func statuses(_ events: [PlayerEvent]) -> [String] {
        events.compactMap { event -> String? in
            switch event {
            case .status(let status, let reason, _): return reason.map { "\(status.rawValue)(\($0.rawValue))" } ?? status.rawValue
            case .stalled: return "stall"
            default: return nil
            }
        }
    }

    /// The link the automatic-waiting tests share: twice as fast as the music, except that after
    /// the first half second of audio the server sends nothing for 2 s. What the player must do
    /// on it does not depend on how fast this machine happens to be: half a second buffered
    /// cannot cover a 2 s silence (a stall, unless the player waits), and after it the rest
    /// arrives at twice real time (no stall, unless delivery loses half its speed).
    static func stallingLink(_ tone: ToneWAV, path: String) async throws -> MediaHTTPServer {
        let server = try await MediaHTTPServer.start(files: [path: tone.bytes])
        server.bandwidth = tone.byteRate * 2
        server.addStall(path: path, afterByte: ToneWAV.headerSize + tone.byteRate / 2, seconds: 2)
        return server
    }

    /// With automatic waiting the player does not start on half a second that cannot last: it
    /// waits through the server's stall and starts once it is likely to keep up, then plays
    /// without a stall, and the output is the signal, exactly, with no silence inserted. (When
    /// a given rate and buffer are likely to keep up is `BufferingEvaluationTests`' subject.)
    @Test func automaticWaitingStartsWhenLikelyToKeepUp() async throws {
        let directory = try TemporaryDirectory("autowait")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 4)
        let server = try await Self.stallingLink(tone, path: "/slow.wav")
        let played = try await Self.play(server.url(for: "/slow.wav"), directory: directory)
        try await server.shutdown()

        let statuses = Self.statuses(played.events)
        #expect(statuses.first?.hasPrefix("waitingToPlayAtSpecifiedRate") == true, "\(statuses)")
        #expect(!statuses.contains("stall"), "\(statuses)")
        #expect(statuses.filter { $0 == "playing" }.count == 1, "\(statuses)")
        // It waited: the first second of music is not there until the 2 s stall has passed.
        let playingAt = played.events.compactMap { event -> Int64? in
            if case .status(.playing, _, let time) = event { return time } else { return nil }
        }.first
        #expect(playingAt.map { $0 - played.playCalledAt } ?? 0 > 2_000_000_000)
        #expect(played.output.count == tone.samples.count)
        #expect(played.output.elementsEqual(tone.samples))
    }

    /// Without automatic waiting the same link stalls, and every stall is reported; the audio
    /// still holds the whole signal once its silences are removed.
    @Test func withoutAutomaticWaitingTheSameLinkStalls() async throws {
        let directory = try TemporaryDirectory("no-autowait")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 3)
        let server = try await Self.stallingLink(tone, path: "/slow.wav")
        var configuration = QueuePlayer.Configuration()
        configuration.automaticallyWaitsToMinimizeStalling = false
        let played = try await Self.play(server.url(for: "/slow.wav"), configuration: configuration, directory: directory)
        try await server.shutdown()

        #expect(Self.statuses(played.events).contains("stall"), "\(played.events) \(Self.silentRuns(played.output))")
        // The stall is heard: a silence of most of the server's 2 s.
        #expect(Self.silentRuns(played.output).contains { $0.count > 48000 }, "\(Self.silentRuns(played.output))")
        let kept = Self.removingSilence(played.output)
        #expect(kept.count == tone.samples.count)
        #expect(kept.elementsEqual(tone.samples))
    }

    /// A 5 s server stall mid-play: playing → waiting → playing on its own, and the output is the
    /// exact signal with one silence inserted where it stalled: nothing lost or repeated.
    @Test func aFiveSecondStallRecoversExactly() async throws {
        let directory = try TemporaryDirectory("stall")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 8)
        let server = try await MediaHTTPServer.start(files: ["/stall.wav": tone.bytes])
        // Twice real time around the stall: the player keeps up unless delivery loses half its speed.
        server.bandwidth = tone.byteRate * 2
        server.addStall(path: "/stall.wav", afterByte: ToneWAV.headerSize + 3 * tone.byteRate, seconds: 5)
        let played = try await Self.play(server.url(for: "/stall.wav"), directory: directory)
        try await server.shutdown()

        let statuses = Self.statuses(played.events)
        let expected = ["playing", "stall", "waitingToPlayAtSpecifiedRate(toMinimizeStalls)", "playing", "paused"]
        #expect(Array(statuses.drop { $0 != "playing" }) == expected, "\(statuses)")
        let runs = Self.silentRuns(played.output)
        #expect(runs.count == 1, "\(runs)")
        // The stall lasted most of the server's 5 s (minus what was buffered ahead).
        #expect((runs.first?.count ?? 0) > 48000, "\(runs)")
        let kept = Self.removingSilence(played.output)
        #expect(kept.count == tone.samples.count)
        #expect(kept.elementsEqual(tone.samples))
    }

    /// Starting 20 s into a 30 s URL fetches from there with a range request; the output is the
    /// signal from 20 s, sample-exact.
    @Test func startingLateSeeksWithARangeRequest() async throws {
        let directory = try TemporaryDirectory("http-seek")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 30)
        let server = try await MediaHTTPServer.start(files: ["/long.wav": tone.bytes])
        server.bandwidth = tone.byteRate * 4
        var configuration = QueuePlayer.Configuration()
        configuration.startTime = MediaTime(value: 20, timescale: 1)
        let played = try await Self.play(server.url(for: "/long.wav"), configuration: configuration, directory: directory, offline: true)
        try await server.shutdown()
        let expected = tone.samples[(20 * 48000 * 2)...]
        #expect(played.output.count == expected.count)
        #expect(played.output.elementsEqual(expected))
        #expect(server.requests(for: "/long.wav").contains { $0.range != nil }, "\(server.requests)")
        #expect(server.totalBodyBytesSent < tone.bytes.count / 2)
    }
}
