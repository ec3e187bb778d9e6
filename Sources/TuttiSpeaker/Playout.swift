import TuttiCore
import TuttiStreamAudio
import TuttiProtocol

/// A room's playout, passive and clocked by its user: asked for the block of device frames
/// `firstFrame ..< firstFrame + blockFrames`, it fills it so that every timeline frame is heard
/// at its anchored server time.
///
/// Three readers wrap one another, roc-toolkit style: `TimelineChunkReader` decodes the
/// stream's chunks, a `VariableRateResampler` steered by the `PlayoutController` reads them at
/// a fractional position and a step close to 1, `ChannelMix` picks the room's channels
/// (`ChannelMode`) and `VolumeRamp` applies the room volume.
/// Whoever owns the room's clock calls `render`: `PlayoutEngine`'s thread, keeping a real
/// device's ring a few tens of milliseconds ahead, or a simulated sound card at each period.
///
/// Thread-safety: not thread-safe; one caller. It allocates only when a stream starts (the
/// decoder) and when a chunk is decoded.
public final class Playout {
    public let inputs: PlayoutInputs
    public let format: AudioFormat
    public let blockFrames: Int
    /// Acoustic delay after the DAC, compensated by playing earlier: the speaker's own, until
    /// the house sets another (`PlayoutInputs.setLatency`).
    public let latencyNanoseconds: Int64
    private let localClock: any HostClock
    private var controller: PlayoutController
    private var resampler: VariableRateResampler
    private var reader: TimelineChunkReader
    private var channelMix: ChannelMix
    private var volume: VolumeRamp
    private var stream: PlayoutInputs.Stream?
    private var flushGeneration = -1
    private var wasPlaying = false
    /// The stream the playout has played audio of (a room that joins another is silent until
    /// its join point without being starved).
    private var playedStreamID: UInt32?
    private var resyncsLogged = 0
    /// What the playout reports about itself, as of the last block.
    public private(set) var report = PlayoutReport()
    /// The block just rendered, interleaved.
    public private(set) var block: [Float]
    /// Notable events (a start, a stall, a resync, a problem), one line each; called by `render`.
    public var onEvent: (@Sendable (String) -> Void)?

    /// Playback waits until the clock estimate rests on this much history: a second of the
    /// start-up burst of exchanges is enough for the first fit of the rate (`ClockEstimator`),
    /// and lets a restarted room play within two seconds of connecting.
    public static let minimumClockSpanNanoseconds: Int64 = 1_000_000_000

    /// - Parameter decodeWorker: where the next chunks are decoded ahead of need; nil decodes
    ///   each on the calling thread when it is needed.
    public init(inputs: PlayoutInputs, format: AudioFormat, blockFrames: Int, latencyNanoseconds: Int64, localClock: any HostClock,
                controller: PlayoutController.Configuration = PlayoutController.Configuration(), decodeWorker: ChunkDecodeWorker? = nil) {
        self.inputs = inputs
        self.format = format
        self.blockFrames = blockFrames
        self.latencyNanoseconds = latencyNanoseconds
        self.localClock = localClock
        self.controller = PlayoutController(configuration: controller)
        resampler = VariableRateResampler(channelCount: format.channelCount, inputCapacityFrames: 16384)
        reader = TimelineChunkReader(chunks: inputs.chunks, channelCount: format.channelCount, worker: decodeWorker)
        channelMix = ChannelMix(crossoverFrames: format.sampleRate / 100)
        volume = VolumeRamp(sampleRate: format.sampleRate)
        block = [Float](repeating: 0, count: blockFrames * format.channelCount)
    }

    /// The device stopped and started again (an xrun, a reopen): the frames it did not emit
    /// are gone, so the next block starts reading afresh where the timeline is then, rather
    /// than counting the gap as drift to correct.
    public func deviceRestarted() {
        controller.stopReading()
    }

    /// Fills `block` with what device frames `firstFrame ..< firstFrame + blockFrames` must
    /// emit, given when the device emits them (`device`: device frame → local time; nil while
    /// unknown, which plays silence).
    public func render(firstFrame: Int64, device: LinearTimeMap?) {
        let n = blockFrames
        let channels = format.channelCount
        let inputs = self.inputs.snapshot
        if inputs.stream != stream {
            stream = inputs.stream
            controller.stopReading()
            reader.open(stream)
            report.problem = ""
            noteProblem()
        }
        if inputs.flushGeneration != flushGeneration {
            flushGeneration = inputs.flushGeneration
            // Audio decoded past the cut must not play: restart reading at the next block.
            if resampler.inputEndFrame > inputs.flushFrame { controller.stopReading() }
        }
        block.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        // A clock estimate younger than a second may still be off by tens of microseconds;
        // wait rather than start out of sync (rooms are normally connected long before play).
        guard let stream, let schedule = inputs.schedule, reader.canDecode, let clock = inputs.clock, clock.spanNanoseconds >= Self.minimumClockSpanNanoseconds,
              let device else {
            report.isPlaying = false
            report.streamID = stream?.id ?? 0
            return
        }
        // Device frame → local emission time → server time, plus the room's acoustic latency.
        let localAtFirst = device.time(ofFrame: firstFrame)
        let heard = LinearTimeMap(referenceFrame: firstFrame,
                                  referenceTime: clock.serverTime(atLocal: localAtFirst) + (inputs.latencyNanoseconds ?? latencyNanoseconds),
                                  nanosecondsPerFrame: device.nanosecondsPerFrame * clock.rate)
        var offset = 0
        var playing = false
        for instruction in controller.plan(firstFrame: firstFrame, frameCount: n, heard: heard, schedule: schedule) {
            switch instruction {
            case .silence(let frames):
                offset += frames
            case .audio(let frames, let start, let step):
                if let start {
                    // Re-seat the resampler so its next output frame reads the timeline at
                    // `start`, refilling its input from the chunk store.
                    resampler.reset(firstInputFrame: start.frame - Int64(resampler.lookaheadFrames), position: start)
                }
                let wanted = resampler.position.frame
                let produced = renderAudio(into: offset, frames: frames, step: step, endFrame: inputs.endFrame)
                if produced < frames {
                    // Before the first frame the room holds of a stream it has not played yet
                    // is where it joins (a room moved into a playing group joins a little after
                    // the playhead): silent by design, not starved.
                    let beforeJoin = playedStreamID != stream.id && (self.inputs.chunks.firstFrame.map { $0 > wanted } ?? false)
                    if !beforeJoin {
                        if wasPlaying {
                            onEvent?("audio at timeline frame \(resampler.position.frame) of stream \(stream.id) has not arrived; silent until it does")
                        }
                        report.starvedBlocks += 1
                    }
                    controller.stopReading()
                    wasPlaying = false
                } else {
                    playing = true
                    playedStreamID = stream.id
                }
                offset += frames
            }
        }
        noteProblem()
        if controller.resyncCount > resyncsLogged {
            resyncsLogged = controller.resyncCount
            onEvent?("resynchronised by a jump: the read position was \((controller.lastError * 10).rounded() / 10) frames off; \(Self.describe(clock))")
        }
        if playing && !wasPlaying {
            onEvent?("playing stream \(stream.id) from timeline frame \(controller.position?.frame ?? -1); \(Self.describe(clock)), over \(clock.sampleCount) exchanges")
        }
        if playing { wasPlaying = true }
        block.withUnsafeMutableBufferPointer {
            channelMix.apply(inputs.channelMode, to: $0.baseAddress!, frames: n, channels: channels)
            volume.apply(target: inputs.volume, rampNanoseconds: inputs.volumeRampNanoseconds, to: $0.baseAddress!, frames: n, channels: channels)
        }
        report.isPlaying = playing
        report.streamID = stream.id
        report.resyncs = controller.resyncCount
        report.syncErrorNanoseconds = Int64(controller.lastError / Double(stream.sampleRate) * 1e9)
        report.playheadFrame = schedule.position(atServer: clock.serverTime(atLocal: localClock.now()) + (inputs.latencyNanoseconds ?? latencyNanoseconds))?.frame ?? -1
        if let reading = controller.position { self.inputs.chunks.discard(before: reading.frame - Int64(stream.sampleRate)) }
    }

    /// The clock estimate a room plays by, for its log lines.
    private static func describe(_ clock: ClockMapping) -> String {
        "clock: server − local \((clock.offset / 1e4).rounded() / 100) ms ± \(Int(clock.errorNanoseconds / 1000)) µs, rate \((clock.skew * 1e7).rounded() / 10) ppm"
    }

    /// Says once, in one line, why the room is silent, and puts it in the room's report.
    private func noteProblem() {
        guard reader.problem != report.problem else { return }
        report.problem = reader.problem
        if !reader.problem.isEmpty { onEvent?(reader.problem) }
    }

    /// Renders `frames` frames at `offset` in `block`; returns how many had audio to read.
    private func renderAudio(into offset: Int, frames: Int, step: Double, endFrame: Int64?) -> Int {
        let channels = format.channelCount
        // Input needed: up to the last read position plus the kernel's lookahead.
        let needed = resampler.position.frame + Int64((Double(frames) * step).rounded(.up)) + Int64(resampler.lookaheadFrames) + 1
        while resampler.inputEndFrame < needed {
            if !reader.feed(resampler, endFrame: endFrame) { break }
        }
        return block.withUnsafeMutableBufferPointer { buffer in
            resampler.render(into: buffer.baseAddress! + offset * channels, frames: frames, step: step)
        }
    }
}
