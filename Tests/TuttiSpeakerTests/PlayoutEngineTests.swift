import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiDevices
import TuttiMedia
import TuttiProtocol
@testable import TuttiSpeaker
import TuttiTestSupport

/// The speaker's playout on a real-time virtual sound card: what it cannot play it says, in one
/// line naming the stream and the chunk, in its events and in its status, and the rest plays on.
@Suite struct PlayoutEngineTests {
    static let format = AudioFormat(sampleRate: 48000, channelCount: 2)

    final class Lines: Sendable {
        private let list = Mutex<[String]>([])
        func append(_ line: String) { list.withLock { $0.append(line) } }
        var all: [String] { list.withLock { $0 } }
    }

    /// A stream whose codec header the speaker cannot open: one line naming the stream, once.
    @Test func aCodecThatCannotOpenIsNamed() async throws {
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: nil, format: Self.format)
        let inputs = PlayoutInputs()
        let engine = PlayoutEngine(inputs: inputs, device: device, latencyNanoseconds: 0, localClock: MonotonicClock())
        let lines = Lines()
        engine.onEvent = { lines.append($0) }
        try engine.start()
        inputs.startStream(.init(id: 7, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: []))
        try await waitUntil("the engine to report the problem") { !engine.latestReport.problem.isEmpty }
        try await onOwnThread("the engine to stop") { try engine.stop() }
        let problem = engine.latestReport.problem
        #expect(problem.hasPrefix("stream 7: cannot open its flac decoder: "), "\(problem)")
        #expect(problem.hasSuffix("silent until the next stream"))
        #expect(!problem.contains("\n"))
        #expect(lines.all == [problem])
    }

    /// One corrupt chunk among ten plays as silence for its length; the chunks before and after
    /// it play, the timeline does not stall, and the problem names the chunk.
    @Test func aCorruptChunkPlaysAsSilenceAndIsNamed() async throws {
        let directory = try TemporaryDirectory("playout-corrupt")
        defer { directory.remove() }
        let chunkFrames = 4800
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let tone = (0..<(10 * chunkFrames)).flatMap { i -> [Float] in
            let x = Float(0.5 * sin(2 * Double.pi * 441 * Double(i) / 48000))
            return [x, -x]
        }
        let capture = directory.file("room.wav")
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: capture, format: Self.format)
        let inputs = PlayoutInputs()
        let clock = MonotonicClock()
        let engine = PlayoutEngine(inputs: inputs, device: device, latencyNanoseconds: 0, localClock: clock)
        let lines = Lines()
        engine.onEvent = { lines.append($0) }
        try engine.start()

        // Encoded before the start is planned: CI's real-time phase, twenty suites starting at once
        // on two cores, once took two seconds over it, and the room joined the stream past its end.
        let payloads = try (0..<10).map { k in
            let payload = try tone.withUnsafeBufferPointer { try encoder.encode($0.baseAddress! + k * chunkFrames * 2, frames: chunkFrames) }
            return k == 4 ? [UInt8](repeating: 0x5A, count: payload.count) : payload
        }
        // The room's clock is the server's (one machine), settled for long enough to play by.
        let now = clock.now()
        inputs.setClock(ClockMapping(reference: now, offset: 0, skew: 0, errorNanoseconds: 1_000, sampleCount: 100,
                                     spanNanoseconds: 3_000_000_000))
        inputs.startStream(.init(id: 9, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: encoder.codecHeader))
        for (k, payload) in payloads.enumerated() {
            inputs.receive(.init(firstFrame: Int64(k * chunkFrames), frameCount: chunkFrames, payload: payload), streamID: 9, at: now)
        }
        inputs.end(streamID: 9, at: Int64(10 * chunkFrames), time: now)
        inputs.apply(TimelineAnchor(timelineFrame: 0, serverTime: now + 1_000_000_000, isPlaying: true), streamID: 9, now: now)

        try await waitUntil("the room to play the stream through") { engine.latestReport.playheadFrame > Int64(11 * chunkFrames) }
        try await onOwnThread("the engine to stop") { try engine.stop() }

        let report = engine.latestReport
        #expect(report.problem.hasPrefix("stream 9: chunk at timeline frame 19200 (4800 frames) cannot be decoded: "), "\(report.problem)")
        #expect(report.problem.hasSuffix("playing silence for it"))
        #expect(lines.all.filter { $0.contains("cannot be decoded") }.count == 1, "\(lines.all)")
        #expect(report.starvedBlocks == 0)
        #expect(report.resyncs == 0)

        // Where the stream starts in the capture, then the level of each chunk's span.
        let samples = try WAVFile(path: capture).samples
        let start = try #require((0..<samples.count / 2).first { abs(samples[2 * $0]) > 0.01 })
        func rms(chunk k: Int) -> Float {
            // The middle of the chunk's span: the resampler's kernel smears its edges.
            let frames = (start + k * chunkFrames + 200)..<(start + (k + 1) * chunkFrames - 200)
            guard frames.upperBound <= samples.count / 2 else { return -1 }
            let sum = frames.reduce(Float(0)) { $0 + samples[2 * $1] * samples[2 * $1] }
            return (sum / Float(frames.count)).squareRoot()
        }
        for k in [0, 1, 2, 3, 5, 6, 7, 8, 9] { #expect(abs(rms(chunk: k) - 0.3536) < 0.02, "chunk \(k): rms \(rms(chunk: k))") }
        #expect(rms(chunk: 4) < 0.001, "the corrupt chunk: rms \(rms(chunk: 4))")
    }

    /// A device with a long period (a small speaker's 50 ms, `--period-ms 50`): the engine keeps
    /// two periods in the ring and refills once a period, and a tone plays through without an
    /// underrun, a starved block or a dropout, its level steady in every 100 ms of the capture.
    @Test(arguments: [480, 2400])
    func aLongDevicePeriodPlaysThrough(periodFrames: Int) async throws {
        let directory = try TemporaryDirectory("playout-period")
        defer { directory.remove() }
        let chunkFrames = 4800
        let chunks = 12
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let tone = (0..<(chunks * chunkFrames)).flatMap { i -> [Float] in
            let x = Float(0.5 * sin(2 * Double.pi * 441 * Double(i) / 48000))
            return [x, -x]
        }
        let capture = directory.file("room.wav")
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: capture, format: Self.format, periodFrames: periodFrames)
        let inputs = PlayoutInputs()
        let clock = MonotonicClock()
        let engine = PlayoutEngine(inputs: inputs, device: device, latencyNanoseconds: 0, localClock: clock)
        #expect(engine.configuration.leadFrames == max(2400, 2 * periodFrames))
        #expect(engine.configuration.refillFrames == max(960, periodFrames))
        #expect(engine.outputLeadNanoseconds == Int64(max(2400, 2 * periodFrames) + 240 + 4 * periodFrames) * 1_000_000_000 / 48000)
        try engine.start()

        // Encoded before the start is planned (see aCorruptChunkPlaysAsSilenceAndIsNamed).
        let payloads = try (0..<chunks).map { k in
            try tone.withUnsafeBufferPointer { try encoder.encode($0.baseAddress! + k * chunkFrames * 2, frames: chunkFrames) }
        }
        let now = clock.now()
        inputs.setClock(ClockMapping(reference: now, offset: 0, skew: 0, errorNanoseconds: 1_000, sampleCount: 100,
                                     spanNanoseconds: 3_000_000_000))
        inputs.startStream(.init(id: 3, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: encoder.codecHeader))
        for (k, payload) in payloads.enumerated() {
            inputs.receive(.init(firstFrame: Int64(k * chunkFrames), frameCount: chunkFrames, payload: payload), streamID: 3, at: now)
        }
        inputs.end(streamID: 3, at: Int64(chunks * chunkFrames), time: now)
        inputs.apply(TimelineAnchor(timelineFrame: 0, serverTime: now + 1_000_000_000, isPlaying: true), streamID: 3, now: now)

        try await waitUntil("the room to play the stream through") { engine.latestReport.playheadFrame > Int64((chunks + 1) * chunkFrames) }
        try await onOwnThread("the engine to stop") { try engine.stop() }
        let report = engine.latestReport
        #expect(report.starvedBlocks == 0 && report.resyncs == 0 && report.deviceUnderruns == 0, "\(report)")

        let samples = try WAVFile(path: capture).samples
        let start = try #require((0..<samples.count / 2).first { abs(samples[2 * $0]) > 0.01 })
        for window in 0..<(chunks * chunkFrames / 4800 - 1) {
            let frames = (start + window * 4800 + 240)..<(start + (window + 1) * 4800 - 240)
            let sum = frames.reduce(Float(0)) { $0 + samples[2 * $1] * samples[2 * $1] }
            let rms = (sum / Float(frames.count)).squareRoot()
            #expect(abs(rms - 0.3536) < 0.01, "100 ms window \(window): rms \(rms)")
        }
    }
}
