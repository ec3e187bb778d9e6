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
        /// How many times the queue plays, joined seamlessly (nil: until stopped): the looper.
        public var passes: Int? = 1
        public init() {}
    }

    public let items: [PlayerItem]
    public let configuration: Configuration
    public let outputFormat: AudioFormat
    /// Called on the producer thread as items start and fail; keep it quick.
    public var onItemEvent: (@Sendable (ItemOutcome) -> Void)?
    /// Called on the player's monitor thread for every `PlayerEvent`, in order; set before `play`.
    public var onEvent: (@Sendable (PlayerEvent) -> Void)?

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
        emit(.status(.waitingToPlayAtSpecifiedRate, reason: .evaluatingBufferingRate, hostTime: device.position().hostTime))
        let preroll = Int(configuration.prerollDuration.frame(atSampleRate: outputFormat.sampleRate))
        let target = min(preroll, source.ring.capacityFrames)
        while source.ring.readableFrames < target && !producerFinished.load(ordering: .acquiring) {
            source.waitForFrames(timeoutNanoseconds: 5_000_000)
        }
        try device.start(source: source)
        if onEvent != nil {
            monitorRunning = true
            let monitor = Thread { [self] in
                monitorPlayback(device)
                monitorDone.signal()
            }
            monitor.name = "tutti-monitor"
            monitor.start()
        }
    }

    private func emit(_ event: PlayerEvent) { onEvent?(event) }
    private let monitorDone = DispatchSemaphore(value: 0)
    private var monitorRunning = false

    /// Turns device positions into events: items are reported when their first frame is
    /// emitted, with that frame's exact host time (from the device's position report), not
    /// when the monitor happens to look. A display-rate loop, off the audio path.
    private func monitorPlayback(_ device: any OutputDevice) {
        let rate = Double(outputFormat.sampleRate)
        var announced = 0
        var failuresReported = Set<String>()
        var underruns = 0
        var playing = false
        func time(ofFrame frame: Int64, _ position: DevicePosition) -> Int64 {
            position.hostTime + Int64((Double(frame - position.framesEmitted) * 1e9 / rate).rounded())
        }
        while true {
            let finished = device.isFinished
            let position = device.position()
            if !playing && position.framesEmitted > 0 {
                playing = true
                emit(.status(.playing, reason: nil, hostTime: time(ofFrame: 0, position)))
            }
            let items = outcomes.withLock { $0 }
            for item in items where item.error != nil || item.info == nil {
                let key = "\(item.pass)/\(item.index)"
                if failuresReported.insert(key).inserted { emit(.itemFailed(item, hostTime: position.hostTime)) }
            }
            let playable = items.filter { $0.info != nil && ($0.frameCount > 0 || $0.error == nil) }
            while announced < playable.count, playable[announced].startFrame <= position.framesEmitted {
                emit(.itemStarted(playable[announced], hostTime: time(ofFrame: playable[announced].startFrame, position)))
                announced += 1
            }
            if device.underrunCount > underruns {
                underruns = device.underrunCount
                emit(.stalled(underruns: underruns, hostTime: position.hostTime))
            }
            if finished {
                emit(.status(.paused, reason: nil, hostTime: position.hostTime))
                emit(.ended(hostTime: position.hostTime))
                return
            }
            var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
            nanosleep(&pause, nil)  // display-rate polling; the times reported come from the device
        }
    }

    /// Stops playback now (Ctrl-C). `waitUntilFinished` then returns promptly.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        source.cancel()
        device?.stop()
    }

    /// Waits for the queue to play out (or for `stop`), then returns what happened to each item.
    public func waitUntilFinished() throws(DeviceError) -> [ItemOutcome] {
        try device?.waitUntilFinished()
        // After a stop the producer may sit in a read of a pipe or stdin that only its writer
        // can end; playback is over, so do not wait for it.
        if !stopRequested.load(ordering: .acquiring) { producerDone.wait() }
        // The last events (end of playback) are out before this returns.
        if monitorRunning { monitorDone.wait() }
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
        let reader = GaplessQueueReader(paths: items.map(\.path), outputRate: outputFormat.sampleRate, channelCount: outputFormat.channelCount,
                                        quality: configuration.resamplerQuality, offset: configuration.startTime,
                                        passes: configuration.passes)
        reader.onItem = { [self] in record($0) }
        var block: [Float] = []
        while !stopRequested.load(ordering: .acquiring) {
            if reader.read(into: &block) == 0 { break }
            if !source.write(block) { break }
        }
    }

    private func record(_ outcome: ItemOutcome) {
        outcomes.withLock { list in
            if let last = list.indices.last, list[last].index == outcome.index && list[last].pass == outcome.pass {
                list[last] = outcome
            } else {
                list.append(outcome)
            }
        }
        onItemEvent?(outcome)
    }
}

