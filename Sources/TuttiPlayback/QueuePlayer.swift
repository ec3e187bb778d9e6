import Foundation
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiMedia

/// Plays a queue of items gaplessly on one output device.
///
/// A producer thread decodes each item, converts it to the device's rate and channel count,
/// and writes it into a `RingRenderSource` that the device pulls from. Items follow each other
/// with no added or missing frames: one resampler is kept across consecutive items of the same
/// source rate, so the joins are continuous. An item that cannot be played is reported and
/// skipped; the rest of the queue plays.
///
/// Thread-safety: control methods may be called from any thread.
public final class QueuePlayer: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Audio decoded ahead of the device.
        public var ringDuration: MediaTime = MediaTime(value: 4, timescale: 1)
        /// Audio buffered before the device starts, so the first periods never underrun.
        public var prerollDuration: MediaTime = MediaTime(value: 1, timescale: 10)
        public var resamplerQuality: Resampler.Quality = .high
        /// Where to start in the first item.
        public var startTime: MediaTime = .zero
        public init() {}
    }

    public let items: [PlayerItem]
    public let configuration: Configuration
    public let outputFormat: AudioFormat
    /// Called on the producer thread as items start and fail; keep it quick.
    public var onItemEvent: (@Sendable (ItemOutcome) -> Void)?

    private let source: RingRenderSource
    private let stopRequested = Atomic<Bool>(false)
    private let outcomes = Mutex<[ItemOutcome]>([])
    private let producerDone = DispatchSemaphore(value: 0)
    private var device: (any OutputDevice)?

    public init(items: [PlayerItem], outputFormat: AudioFormat, configuration: Configuration = Configuration()) {
        self.items = items
        self.outputFormat = outputFormat
        self.configuration = configuration
        let capacity = Int(configuration.ringDuration.frame(atSampleRate: outputFormat.sampleRate))
        source = RingRenderSource(channelCount: outputFormat.channelCount, capacityFrames: max(capacity, 4096))
    }

    /// Starts decoding, waits for the preroll, then starts `device`. Returns once audio is flowing.
    public func play(on device: any OutputDevice) throws(DeviceError) {
        precondition(device.format.sampleRate == outputFormat.sampleRate && device.format.channelCount == outputFormat.channelCount,
                     "device format must match the player's output format")
        self.device = device
        let thread = Thread { [self] in
            produce()
            producerDone.signal()
        }
        thread.name = "tutti-decode"
        thread.start()
        let preroll = Int(configuration.prerollDuration.frame(atSampleRate: outputFormat.sampleRate))
        let target = min(preroll, source.ring.capacityFrames)
        while source.ring.readableFrames < target && !producerFinished.load(ordering: .acquiring) {
            source.waitForFrames(timeoutNanoseconds: 5_000_000)
        }
        try device.start(source: source)
    }

    /// Stops playback now (Ctrl-C). `waitUntilFinished` then returns promptly.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        source.cancel()
        device?.stop()
    }

    /// Waits for the queue to play out (or for `stop`), then returns what happened to each item.
    public func waitUntilFinished() throws(DeviceError) -> [ItemOutcome] {
        producerDone.wait()
        try device?.waitUntilFinished()
        return outcomes.withLock { $0 }
    }

    /// Items started so far, with their timeline positions; for progress displays.
    public var startedItems: [ItemOutcome] { outcomes.withLock { $0 } }

    /// Output frames the device has emitted: the playhead on the queue's timeline.
    public var playheadFrame: Int64 { device?.position().framesEmitted ?? 0 }

    // MARK: Producer

    private let producerFinished = Atomic<Bool>(false)

    private func produce() {
        defer {
            source.finish()
            producerFinished.store(true, ordering: .releasing)
        }
        let channels = outputFormat.channelCount
        let outputRate = outputFormat.sampleRate
        var resampler: Resampler? = nil
        var segmentRate = outputRate
        var segmentOutputStart: Int64 = 0   // output frames pushed before the current resampler
        var segmentInput: Int64 = 0         // input frames fed to the current resampler
        var decoded: [Float] = []
        var converted: [Float] = []
        var written: Int64 = 0

        func push(_ samples: [Float]) -> Bool {
            written += Int64(samples.count / channels)
            return source.write(samples)
        }
        func outputPosition() -> Int64 {
            segmentOutputStart + WideMath.multiplyDivide(segmentInput, Int64(outputRate), Int64(segmentRate), rounding: .toNearestOrAwayFromZero)
        }
        func endSegment() -> Bool {
            if let active = resampler {
                converted.removeAll(keepingCapacity: true)
                active.flush(appendingTo: &converted)
                if !push(converted) { return false }
            }
            resampler = nil
            segmentOutputStart = written
            segmentInput = 0
            return true
        }

        for (index, item) in items.enumerated() {
            if stopRequested.load(ordering: .acquiring) { return }
            var outcome = ItemOutcome(index: index, item: item, info: nil, startFrame: outputPosition(), frameCount: 0, error: nil)
            let decoder: AudioFileDecoder
            do throws(MediaError) {
                decoder = try AudioFileDecoder(path: item.path, outputChannelCount: channels)
                if index == 0 && configuration.startTime > .zero {
                    try decoder.seek(toFrame: configuration.startTime.frame(atSampleRate: decoder.sampleRate, rounding: .toNearestOrAwayFromZero))
                }
            } catch {
                outcome.error = error
                record(outcome)
                continue
            }
            outcome.info = decoder.info
            if decoder.sampleRate != segmentRate || (resampler == nil && decoder.sampleRate != outputRate) {
                guard endSegment() else { return }
                segmentRate = decoder.sampleRate
                if segmentRate != outputRate {
                    do throws(MediaError) {
                        resampler = try Resampler(inputRate: segmentRate, outputRate: outputRate, channelCount: channels, quality: configuration.resamplerQuality)
                    } catch {
                        outcome.error = error
                        record(outcome)
                        continue
                    }
                }
            }
            outcome.startFrame = outputPosition()
            record(outcome)
            var itemFrames: Int64 = 0
            do throws(MediaError) {
                while !stopRequested.load(ordering: .acquiring) {
                    let frames = try decoder.read(into: &decoded)
                    if frames == 0 { break }
                    itemFrames += Int64(frames)
                    segmentInput += Int64(frames)
                    if let resampler {
                        converted.removeAll(keepingCapacity: true)
                        decoded.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: frames, appendingTo: &converted) }
                        if !push(converted) { return }
                    } else if !push(decoded) {
                        return
                    }
                }
            } catch {
                outcome.error = error
            }
            if outcome.error == nil { outcome.error = Self.problem(with: decoder, framesDecoded: itemFrames) }
            outcome.frameCount = outputPosition() - outcome.startFrame
            record(outcome)
        }
        _ = endSegment()
    }

    /// Partial failures found after decoding: the item played, but not all of it.
    static func problem(with decoder: AudioFileDecoder, framesDecoded: Int64) -> MediaError? {
        let input = decoder.info.input
        if let readError = decoder.readError {
            return MediaError(.corrupt, input: input, reason: "read error after \(formatSeconds(framesDecoded, decoder.sampleRate)): \(readError)")
        }
        if decoder.corruptPacketCount > 0 {
            return MediaError(.corrupt, input: input, reason: "\(decoder.corruptPacketCount) corrupt packet(s) skipped")
        }
        if !decoder.info.durationIsEstimate, let expected = decoder.expectedFrameCount, decoder.position < expected - Int64(decoder.sampleRate / 5) {
            return MediaError(.truncated, input: input, reason: "truncated: decoded \(formatSeconds(decoder.position, decoder.sampleRate)) of \(formatSeconds(expected, decoder.sampleRate))")
        }
        if framesDecoded == 0 {
            return MediaError(.corrupt, input: input, reason: "no audio could be decoded")
        }
        return nil
    }

    private func record(_ outcome: ItemOutcome) {
        outcomes.withLock { list in
            if let last = list.indices.last, list[last].index == outcome.index { list[last] = outcome } else { list.append(outcome) }
        }
        onItemEvent?(outcome)
    }
}

func formatSeconds(_ frames: Int64, _ rate: Int) -> String {
    let tenths = WideMath.multiplyDivide(frames, 10, Int64(rate))
    return "\(tenths / 10).\(tenths % 10) s"
}
