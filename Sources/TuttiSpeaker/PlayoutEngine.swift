import Synchronization
import TuttiCore
import TuttiDevices
import TuttiMedia
#if canImport(Glibc)
import Glibc
#endif
import TuttiProtocol

/// Everything a speaker's playout needs from the network side, updated by the connection and
/// read by the engine once per block. Thread-safe.
public final class PlayoutInputs: Sendable {
    public struct Stream: Sendable, Equatable {
        public var id: UInt32
        public var codec: StreamCodec
        public var sampleRate: Int
        public var channelCount: Int
        public var codecHeader: [UInt8]
    }

    struct State: Sendable {
        var stream: Stream?
        var schedule = TimelineSchedule(sampleRate: 48000)
        var clock: ClockMapping?
        var volume: Float = 1
        var volumeRampNanoseconds: Int64 = 0
        var endFrame: Int64?
        /// Bumped by every flush the engine must honour (it drops decoded audio past the cut).
        var flushGeneration = 0
        var flushFrame: Int64 = .min
        /// Local times bracketing the arrival of the stream's audio, for the fill rate.
        var firstChunkTime: Int64?
        var firstChunkFrame: Int64 = 0
        var fillRate: Double = 0
    }

    let state = Mutex(State())
    public let chunks = ChunkStore()

    public init() {}

    public func startStream(_ stream: Stream) {
        chunks.removeAll()
        state.withLock {
            $0.stream = stream
            $0.schedule = TimelineSchedule(sampleRate: stream.sampleRate)
            $0.endFrame = nil
            $0.flushGeneration += 1
            $0.flushFrame = .min
            $0.firstChunkTime = nil
            $0.fillRate = 0
        }
    }

    /// Stores a chunk of the current stream (received at local time `time`) and notes when the
    /// whole stream has arrived.
    public func receive(_ chunk: ChunkStore.Chunk, streamID: UInt32, at time: Int64) {
        let current = state.withLock { s -> Bool in
            guard s.stream?.id == streamID else { return false }
            if s.firstChunkTime == nil {
                s.firstChunkTime = time
                s.firstChunkFrame = chunk.firstFrame
            }
            return true
        }
        guard current else { return }
        chunks.insert(chunk)
        noteFill(at: time)
    }

    private func noteFill(at time: Int64) {
        state.withLock { s in
            guard s.fillRate == 0, let end = s.endFrame, let start = s.firstChunkTime, let stream = s.stream else { return }
            if chunks.contiguousEnd(from: s.firstChunkFrame) >= end && time > start {
                s.fillRate = Double(end - s.firstChunkFrame) / Double(stream.sampleRate) / (Double(time - start) / 1e9)
            }
        }
    }

    public func apply(_ anchor: TimelineAnchor, streamID: UInt32, now serverNow: Int64) {
        state.withLock {
            guard $0.stream?.id == streamID else { return }
            $0.schedule.apply(anchor, now: serverNow)
        }
    }

    /// Drops audio from `frame` on; from `.min`, everything: the room leaves the stream.
    public func flush(streamID: UInt32, from frame: Int64) {
        if frame == .min {
            if state.withLock({ $0.stream?.id == streamID }) { stop() }
            return
        }
        let applies = state.withLock { s -> Bool in
            guard s.stream?.id == streamID else { return false }
            s.flushGeneration += 1
            s.flushFrame = frame
            if let end = s.endFrame, end >= frame { s.endFrame = nil }
            return true
        }
        guard applies else { return }
        chunks.flush(from: frame)
    }

    public func end(streamID: UInt32, at frame: Int64, time: Int64) {
        state.withLock { if $0.stream?.id == streamID { $0.endFrame = frame } }
        noteFill(at: time)
    }

    public func setClock(_ mapping: ClockMapping) { state.withLock { $0.clock = mapping } }

    public func setVolume(_ level: Float, rampNanoseconds: Int64) {
        state.withLock {
            $0.volume = level
            $0.volumeRampNanoseconds = rampNanoseconds
        }
    }

    public func stop() {
        chunks.removeAll()
        state.withLock {
            $0.stream = nil
            $0.endFrame = nil
            $0.flushGeneration += 1
        }
    }

    var snapshot: State { state.withLock { $0 } }
}

/// What the engine reports about itself (for status messages and `tutti ctl rooms`).
public struct PlayoutReport: Sendable, Equatable {
    public var isPlaying = false
    public var streamID: UInt32 = 0
    /// Timeline frame being heard now (approximately: at the last block), or -1.
    public var playheadFrame: Int64 = -1
    public var syncErrorNanoseconds: Int64 = 0
    public var resyncs = 0
    /// Blocks cut short because audio had not arrived.
    public var starvedBlocks = 0
    public var deviceUnderruns = 0
    /// Why audio that arrived cannot be played (a codec the speaker cannot open, a corrupt
    /// chunk), in one line; empty when nothing is wrong.
    public var problem = ""
}

/// The speaker's playout thread: decodes the deep buffer just ahead of the device, resamples it
/// continuously so that each timeline frame is heard at its anchored server time, applies the
/// room volume with ramps, and keeps the device's ring a few tens of milliseconds full.
///
/// It runs on its own thread (elevated priority when permitted). It allocates only when a new
/// stream starts; the device's render thread only reads the ring.
public final class PlayoutEngine: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var blockFrames = 240
        /// How far ahead of the device the ring is kept: the command-to-sound floor.
        public var leadFrames = 2400
        public var controller = PlayoutController.Configuration()
        public init() {}
    }

    /// Playback waits until the clock estimate rests on this much history.
    public static let minimumClockSpanNanoseconds: Int64 = 2_000_000_000

    public let inputs: PlayoutInputs
    public let device: any OutputDevice
    public let source: PlayoutRenderSource
    public let configuration: Configuration
    /// Acoustic delay after the DAC, compensated by playing earlier.
    public let latencyNanoseconds: Int64
    private let localClock: any HostClock
    private let running = Atomic<Bool>(false)
    private let reportState = Mutex(PlayoutReport())
    private var thread: DeviceThread?

    // Engine-thread state.
    private var controller: PlayoutController
    private var deviceTiming: DeviceTimingEstimator
    private var resampler: VariableRateResampler
    private var decoder: ChunkDecoder?
    private var stream: PlayoutInputs.Stream?
    private var flushGeneration = -1
    private var decoded: [Float] = []
    private var block: [Float]
    private var gain: Float = 1
    private var gainTarget: Float = 1
    private var gainStep: Float = 0
    private var lastPositionRead: Int64 = 0
    private var report = PlayoutReport()
    private var wasPlaying = false
    private var resyncsLogged = 0
    /// Notable events (a stall, a resync), one line each; called on the engine thread.
    public var onEvent: (@Sendable (String) -> Void)?

    public init(inputs: PlayoutInputs, device: any OutputDevice, latencyNanoseconds: Int64, localClock: any HostClock,
                configuration: Configuration = Configuration()) {
        self.inputs = inputs
        self.device = device
        self.latencyNanoseconds = latencyNanoseconds
        self.localClock = localClock
        self.configuration = configuration
        let channels = device.format.channelCount
        source = PlayoutRenderSource(channelCount: channels, capacityFrames: configuration.leadFrames * 4)
        controller = PlayoutController(configuration: configuration.controller)
        deviceTiming = DeviceTimingEstimator(sampleRate: device.format.sampleRate)
        resampler = VariableRateResampler(channelCount: channels, inputCapacityFrames: 16384)
        block = [Float](repeating: 0, count: configuration.blockFrames * channels)
    }

    public var latestReport: PlayoutReport { reportState.withLock { $0 } }

    /// Prefills the ring with silence, starts the device and the engine thread.
    public func start() throws(DeviceError) {
        let silence = [Float](repeating: 0, count: configuration.leadFrames * device.format.channelCount)
        _ = source.ring.write(silence, frames: configuration.leadFrames)
        try device.start(source: source)
        running.store(true, ordering: .releasing)
        thread = DeviceThread(name: "tutti-playout", realtime: true, priority: 30) { [self] in run() }
    }

    public func stop() throws(DeviceError) {
        running.store(false, ordering: .releasing)
        source.consumed.signal()
        thread?.join()
        device.stop()
        try device.waitUntilFinished()
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            if source.ring.readableFrames >= configuration.leadFrames || source.ring.writableFrames < configuration.blockFrames {
                source.consumed.prepareToWait()
                if source.ring.readableFrames >= configuration.leadFrames { source.consumed.wait(timeoutNanoseconds: 20_000_000) }
                continue
            }
            let firstFrame = source.nextWriteDeviceFrame
            renderBlock(firstFrame: firstFrame)
            _ = block.withUnsafeBufferPointer { source.ring.write($0.baseAddress!, frames: configuration.blockFrames) }
        }
    }

    /// Fills `block` with what device frames `firstFrame ..< firstFrame + blockFrames` must emit.
    private func renderBlock(firstFrame: Int64) {
        let n = configuration.blockFrames
        let channels = device.format.channelCount
        let inputs = self.inputs.snapshot
        refreshDeviceTiming()
        if inputs.stream != stream { switchStream(to: inputs.stream) }
        if inputs.flushGeneration != flushGeneration {
            flushGeneration = inputs.flushGeneration
            // Audio decoded past the cut must not play: restart reading at the next block.
            if resampler.inputEndFrame > inputs.flushFrame { controller.stopReading() }
        }
        block.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        // A clock estimate younger than two seconds may still be off by tens of microseconds;
        // wait rather than start out of sync (rooms are normally connected long before play).
        guard let stream, decoder != nil, let clock = inputs.clock, clock.spanNanoseconds >= Self.minimumClockSpanNanoseconds,
              let device = deviceTiming.map else {
            publish(playing: false, inputs: inputs)
            return
        }
        // Device frame → local emission time → server time, plus the room's acoustic latency.
        let localAtFirst = device.time(ofFrame: firstFrame)
        let heard = LinearTimeMap(referenceFrame: firstFrame,
                                  referenceTime: clock.serverTime(atLocal: localAtFirst) + latencyNanoseconds,
                                  nanosecondsPerFrame: device.nanosecondsPerFrame * clock.rate)
        var offset = 0
        var playing = false
        for instruction in controller.plan(firstFrame: firstFrame, frameCount: n, heard: heard, schedule: inputs.schedule) {
            switch instruction {
            case .silence(let frames):
                offset += frames
            case .audio(let frames, let start, let step):
                if let start { position(at: start) }
                let produced = renderAudio(into: offset, frames: frames, step: step, endFrame: inputs.endFrame)
                if produced < frames {
                    if wasPlaying {
                        onEvent?("audio at timeline frame \(resampler.position.frame) of stream \(stream.id) has not arrived; silent until it does")
                    }
                    controller.stopReading()
                    report.starvedBlocks += 1
                    wasPlaying = false
                } else {
                    playing = true
                }
                offset += frames
            }
        }
        if controller.resyncCount > resyncsLogged {
            resyncsLogged = controller.resyncCount
            onEvent?("resynchronised by a jump: the read position was \((controller.lastError * 10).rounded() / 10) frames off")
        }
        if playing && !wasPlaying {
            let ms = (clock.offset / 1e4).rounded() / 100, ppm = (clock.skew * 1e7).rounded() / 10
            onEvent?("playing stream \(stream.id) from timeline frame \(controller.position?.frame ?? -1); clock: server − local \(ms) ms ± \(Int(clock.errorNanoseconds / 1000)) µs, rate \(ppm) ppm, over \(clock.sampleCount) exchanges")
        }
        if playing { wasPlaying = true }
        applyGain(target: inputs.volume, rampNanoseconds: inputs.volumeRampNanoseconds, channels: channels)
        report.syncErrorNanoseconds = Int64(controller.lastError / Double(stream.sampleRate) * 1e9)
        report.playheadFrame = inputs.schedule.position(atServer: clock.serverTime(atLocal: localClock.now()) + latencyNanoseconds)?.frame ?? -1
        if let reading = controller.position { self.inputs.chunks.discard(before: reading.frame - 48000) }
        publish(playing: playing, inputs: inputs)
    }

    private func publish(playing: Bool, inputs: PlayoutInputs.State) {
        report.isPlaying = playing
        report.streamID = stream?.id ?? 0
        report.resyncs = controller.resyncCount
        report.deviceUnderruns = device.underrunCount
        let snapshot = report
        reportState.withLock { $0 = snapshot }
    }

    private func refreshDeviceTiming() {
        let position = device.position()
        if position.framesEmitted >= lastPositionRead + 480 {
            deviceTiming.add(frame: position.framesEmitted, time: position.hostTime)
            lastPositionRead = position.framesEmitted
        }
    }

    private func switchStream(to next: PlayoutInputs.Stream?) {
        stream = next
        decoder = nil
        report.problem = ""
        controller.stopReading()
        guard let next else { return }
        guard next.channelCount == device.format.channelCount else {
            // External data: the house sent a stream this room's device cannot play.
            problem("stream \(next.id) has \(next.channelCount) channels, this room's output \(device.format.channelCount); silent until the next stream")
            return
        }
        do {
            decoder = try ChunkDecoder(codec: next.codec, sampleRate: next.sampleRate, channelCount: next.channelCount, codecHeader: next.codecHeader)
        } catch {
            problem("stream \(next.id): cannot open its \(next.codec.wireName) decoder: \(error.reason); silent until the next stream")
        }
    }

    /// Says once, in one line, why the room is silent, and puts it in the room's status.
    private func problem(_ line: String) {
        guard report.problem != line else { return }
        report.problem = line
        onEvent?(line)
    }

    /// Re-seats the resampler so that the next output frame reads the timeline at `start`,
    /// refilling its input from the chunk store (starts are rare; the cost is one chunk decode).
    private func position(at start: FramePosition) {
        resampler.reset(firstInputFrame: start.frame - Int64(resampler.lookaheadFrames),
                        position: start)
    }

    /// Renders `frames` frames at `offset` in `block`; returns how many had audio to read.
    private func renderAudio(into offset: Int, frames: Int, step: Double, endFrame: Int64?) -> Int {
        let channels = device.format.channelCount
        // Input needed: up to the last read position plus the kernel's lookahead.
        let needed = resampler.position.frame + Int64((Double(frames) * step).rounded(.up)) + Int64(resampler.lookaheadFrames) + 1
        while resampler.inputEndFrame < needed {
            if !feedInput(endFrame: endFrame) { break }
        }
        return block.withUnsafeMutableBufferPointer { buffer in
            resampler.render(into: buffer.baseAddress! + offset * channels, frames: frames, step: step)
        }
    }

    /// Appends the next stretch of timeline audio to the resampler: decoded chunk frames, or
    /// silence before the stream's start and after its end. False when the audio has not arrived.
    private func feedInput(endFrame: Int64?) -> Bool {
        let channels = device.format.channelCount
        let frame = resampler.inputEndFrame
        if frame < 0 || (endFrame.map { frame >= $0 } ?? false) {
            return appendSilence(frame < 0 ? min(-frame, 4096) : 4096)
        }
        guard let chunk = inputs.chunks.chunk(containing: frame), let decoder else { return false }
        let frames: Int
        do { frames = try decoder.decode(chunk.payload, into: &decoded) } catch {
            // A corrupt chunk plays as silence for its length: the timeline goes on.
            problem("stream \(stream?.id ?? 0): chunk at timeline frame \(chunk.firstFrame) (\(chunk.frameCount) frames) cannot be decoded: \(error.reason); playing silence for it")
            return appendSilence(chunk.firstFrame + Int64(chunk.frameCount) - frame)
        }
        guard frames >= chunk.frameCount else {
            problem("stream \(stream?.id ?? 0): chunk at timeline frame \(chunk.firstFrame) decoded to \(frames) of its \(chunk.frameCount) frames; playing silence for the rest")
            decoded.removeSubrange((frames * channels)...)
            decoded += [Float](repeating: 0, count: (chunk.frameCount - frames) * channels)
            return feedDecoded(chunk, from: frame)
        }
        return feedDecoded(chunk, from: frame)
    }

    /// Appends the decoded frames of `chunk` from timeline frame `frame` on.
    private func feedDecoded(_ chunk: ChunkStore.Chunk, from frame: Int64) -> Bool {
        let channels = device.format.channelCount
        let skip = Int(frame - chunk.firstFrame)
        let count = min(chunk.frameCount - skip, resampler.writableFrames)
        guard count > 0 else { return false }
        return decoded.withUnsafeBufferPointer { resampler.appendInput($0.baseAddress! + skip * channels, frames: count) } > 0
    }

    /// Appends up to `frames` frames of silence to the resampler's input.
    private func appendSilence(_ frames: Int64) -> Bool {
        let count = Int(min(frames, 4096))
        guard count > 0 else { return false }
        let zeros = [Float](repeating: 0, count: count * device.format.channelCount)
        return zeros.withUnsafeBufferPointer { resampler.appendInput($0.baseAddress!, frames: count) } > 0
    }

    /// Moves the gain towards `target` in a straight line over the ramp, sample by sample: no
    /// zipper noise, whatever the block size. A new target restarts the ramp from where it is.
    private func applyGain(target: Float, rampNanoseconds: Int64, channels: Int) {
        if target != gainTarget {
            gainTarget = target
            let rampFrames = max(1.0, Double(rampNanoseconds) / 1e9 * Double(device.format.sampleRate))
            gainStep = Float(Double(target - gain) / rampFrames)
        }
        if gain == gainTarget && gain == 1 { return }
        block.withUnsafeMutableBufferPointer { samples in
            for frame in 0..<configuration.blockFrames {
                if gain != gainTarget {
                    gain += gainStep
                    if (gainStep > 0 && gain > gainTarget) || (gainStep <= 0 && gain < gainTarget) { gain = gainTarget }
                }
                for c in 0..<channels { samples[frame * channels + c] *= gain }
            }
        }
    }
}
