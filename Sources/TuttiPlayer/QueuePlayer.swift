import Foundation
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiMedia
import TuttiEngine

/// Plays a queue of items gaplessly on one output device, with AVPlayer's semantics for rate,
/// status and buffering.
///
/// Three threads: the engine's producer (`QueueProducer`, the same one the house server streams
/// to its rooms with) decodes each item, converts it to the device's rate and channel count and
/// writes it into a `RingRenderSource`; the device's render thread pulls from it; a
/// supervisor turns the render source's timebase log and the device's position reports into
/// status, buffering and item events stamped with the host time at which they are heard, and
/// decides when playback is likely to keep up.
///
/// - Automatic waiting (`automaticallyWaitsToMinimizeStalling`, on by default): the device
///   starts only once playback is likely to keep up (`BufferingEvaluation`), and after a stall
///   the player waits, playing silence with its timeline stopped, until it is likely to keep up
///   again. Nothing is lost or repeated: the timeline resumes at the frame where it stalled.
/// - `rate` is the desired rate (0 paused, 1 playing); `timebaseRate` is the actual one, 0 while
///   waiting.
///
/// Items follow each other with no added or missing frames; an item that cannot be played is
/// reported and skipped; the rest of the queue plays.
///
/// The queue can be edited while it plays (AVQueuePlayer): `insert(_:after:)`, `remove(_:)`,
/// `move(_:after:)`, `advanceToNextItem()`. The producer decodes seconds ahead, so an edit that
/// changes audio already decoded flushes the ring from the first frame that changes — an item
/// boundary, or for an advance the playhead plus `editLead` — and decodes on from there; the
/// timeline (`currentTime`) runs on without a jump. Edits beyond what is decoded cost nothing.
///
/// Thread-safety: control methods and properties may be used from any thread.
public final class QueuePlayer: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Audio decoded ahead of the device.
        public var ringDuration: MediaTime = MediaTime(value: 4, timescale: 1)
        /// Audio buffered before a local item starts, so the first periods never underrun.
        public var prerollDuration: MediaTime = MediaTime(value: 1, timescale: 10)
        /// Audio buffered ahead before a network item starts or resumes, at the least.
        public var networkPrerollDuration: MediaTime = MediaTime(value: 1, timescale: 1)
        public var resamplerQuality: Resampler.Quality = .high
        /// Where to start in the first item.
        public var startTime: MediaTime = .zero
        /// How many times the queue plays, joined seamlessly (nil: until stopped): the looper.
        public var passes: Int? = 1
        /// Start and resume only when playback is likely to keep up (AVPlayer's default).
        /// When false, playback starts after the preroll and resumes as soon as audio arrives.
        public var automaticallyWaitsToMinimizeStalling = true
        /// What happens when an item ends; can be changed while playing (`actionAtItemEnd`).
        public var actionAtItemEnd: ActionAtItemEnd = .advance
        /// How far ahead of the device's read position an advance or a removal of the playing
        /// item cuts: enough for the next item's first frames to be decoded in time.
        public var editLead: MediaTime = MediaTime(value: 1, timescale: 20)
        /// Opens the items that are URLs; nil refuses them, each with a one-line error.
        public var network: (any NetworkInputOpener)?
        public init() {}
    }

    public let configuration: Configuration
    public let outputFormat: AudioFormat
    /// Called on the producer thread as items start and fail; keep it quick.
    public var onItemEvent: (@Sendable (ItemOutcome) -> Void)?
    /// Called on the player's supervisor thread for every `PlayerEvent`, in order; set before `play`.
    public var onEvent: (@Sendable (PlayerEvent) -> Void)?

    private let source: RingRenderSource
    /// The engine: decodes the queue into `source` and applies queue edits.
    private let engine: QueueProducer
    private let stopRequested = Atomic<Bool>(false)
    private let supervisorDone = DispatchSemaphore(value: 0)
    private let shared = Mutex(SharedState())
    private let catalog = Mutex(Catalog())
    private let ringOutput: DeviceRingOutput

    /// The items behind the engine's entries (an entry's tag names its item).
    private struct Catalog {
        var items: [Int: PlayerItem] = [:]
        var nextTag = 0

        mutating func makeEntry(_ item: PlayerItem) -> GaplessQueueReader.Entry {
            defer { nextTag += 1 }
            items[nextTag] = item
            return GaplessQueueReader.Entry(path: item.path, endTime: item.forwardPlaybackEndTime, tag: nextTag)
        }
    }

    /// The position of `item` in `entries`, given the catalog's `items`.
    private static func index(of item: PlayerItem, in entries: [GaplessQueueReader.Entry], items: [Int: PlayerItem]) -> Int? {
        entries.firstIndex { items[$0.tag]?.id == item.id }
    }

    /// State the supervisor publishes and control methods read.
    private struct SharedState {
        var device: (any OutputDevice)?
        var rate: Double = 0
        var status: TimeControlStatus = .paused
        var waitingReason: WaitingReason?
        var buffering = ItemBufferingState()
        var timeline = PlaybackTimeline()
        var deviceStarted = false
        var startError: DeviceError?
        var itemNetwork: ItemNetwork?
        var subscribers: [UUID: AsyncStream<PlayerEvent>.Continuation] = [:]
        var timeObservers: [UUID: TimeObserver] = [:]
    }

    /// What the producer knows about the current item's bytes, for buffering decisions.
    private struct ItemNetwork {
        var source: any MediaByteSource
        var bytePosition: Int64
        var bytesPerMediaSecond: Double?
    }

    private struct TimeObserver {
        var continuation: AsyncStream<MediaTime>.Continuation
        var interval: Int64?
        var boundaries: [Int64]
        var next: Int64
    }

    public init(items: [PlayerItem], outputFormat: AudioFormat, configuration: Configuration = Configuration()) {
        let entries = catalog.withLock { catalog in items.map { catalog.makeEntry($0) } }
        self.outputFormat = outputFormat
        self.configuration = configuration
        let capacity = Int(configuration.ringDuration.frame(atSampleRate: outputFormat.sampleRate))
        source = RingRenderSource(channelCount: outputFormat.channelCount, capacityFrames: max(capacity, 4096),
                                  waitsAfterStall: configuration.automaticallyWaitsToMinimizeStalling)
        let output = DeviceRingOutput(source: source,
                                      editLeadFrames: Int(configuration.editLead.frame(atSampleRate: outputFormat.sampleRate)),
                                      actionAtItemEnd: configuration.actionAtItemEnd)
        ringOutput = output
        var engineConfiguration = QueueProducer.Configuration(outputFormat: outputFormat)
        engineConfiguration.resamplerQuality = configuration.resamplerQuality
        engineConfiguration.passes = configuration.passes
        engineConfiguration.startTime = configuration.startTime
        engineConfiguration.network = configuration.network
        engine = QueueProducer(entries: entries, configuration: engineConfiguration, output: output)
        engine.onItem = { [weak self] outcome in self?.onItemEvent?(outcome) }
        engine.onRead = { [weak self] decoder in self?.publishNetworkProgress(decoder) }
        engine.onNetworkEvent = { [weak self] tag, event in
            guard let self else { return }
            let now = self.hostNow()
            switch event {
            case .retrying(let attempt, let delay, let reason):
                self.emit(.retrying(index: tag, attempt: attempt, delay: delay, reason: reason, hostTime: now))
            case .title(let title):
                self.emit(.title(index: tag, title, hostTime: now))
            }
        }
    }

    // MARK: Control

    /// Starts playing on `device` (rate 1). Returns at once: the device starts when playback is
    /// likely to keep up (see `timeControlStatus`). Device errors surface from `waitUntilFinished`.
    public func play(on device: any OutputDevice) throws(DeviceError) {
        precondition(device.format.sampleRate == outputFormat.sampleRate && device.format.channelCount == outputFormat.channelCount,
                     "device format must match the player's output format")
        shared.withLock {
            $0.device = device
            $0.rate = 1
            $0.status = .waitingToPlayAtSpecifiedRate
            $0.waitingReason = .evaluatingBufferingRate
        }
        emit(.status(.waitingToPlayAtSpecifiedRate, reason: .evaluatingBufferingRate, hostTime: device.clock.now()))
        source.isPaced = device.isPaced
        engine.start(raisedPriority: true)
        if !device.isPaced {
            // An offline device waits for data itself: it cannot stall, so it starts at once.
            try device.start(source: source)
            shared.withLock { $0.deviceStarted = true }
        }
        let supervisor = Thread { [self] in
            // It starts the device and ends stalls: light work the listener waits on.
            FeederPriority.raiseCurrentThread()
            supervise(device)
            finished.store(true, ordering: .releasing)
            supervisorDone.signal()
        }
        supervisor.name = "tutti-supervisor"
        supervisor.start()
    }

    /// Pauses: silence at the next period, timeline stopped (rate 0).
    public func pause() {
        shared.withLock { $0.rate = 0 }
        source.setPaused(true)
    }

    /// Resumes after `pause` (rate 1); with automatic waiting, only once likely to keep up.
    public func resume() {
        shared.withLock { $0.rate = 1 }
        source.setPaused(false)
    }

    /// Stops playback now (Ctrl-C). `waitUntilFinished` then returns promptly.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        engine.stop()
        source.cancel()
        shared.withLock { $0.device }?.stop()
    }

    /// True once playback has ended (played out, stopped, or nothing could play).
    public var isFinished: Bool { finished.load(ordering: .acquiring) }
    private let finished = Atomic<Bool>(false)

    /// Waits for the queue to play out (or for `stop`), then returns what happened to each item.
    public func waitUntilFinished() throws(DeviceError) -> [ItemOutcome] {
        supervisorDone.wait()
        let (device, startError) = shared.withLock { ($0.device, $0.startError) }
        if let startError { throw startError }
        try device?.waitUntilFinished()
        // After a stop the producer may sit in a read of a pipe or stdin that only its writer
        // can end; playback is over, so do not wait for it.
        if !stopRequested.load(ordering: .acquiring) { engine.waitUntilFinished() }
        return engine.outcomes
    }

    // MARK: Queue

    /// The queue, played and to come (with passes, the queue each pass plays).
    public var items: [PlayerItem] {
        let items = catalog.withLock { $0.items }
        return engine.entries.compactMap { items[$0.tag] }
    }

    /// The item heard now (nil before the first starts and after the queue ends).
    public var currentItem: PlayerItem? {
        guard let outcome = engine.outcome(atFrame: playheadFrame) else { return nil }
        return catalog.withLock { $0.items[outcome.tag] }
    }

    /// What happens when an item ends. Changing it while playing applies to the next item end
    /// not yet reached.
    public var actionAtItemEnd: ActionAtItemEnd {
        get { ringOutput.actionAtItemEnd }
        set {
            ringOutput.actionAtItemEnd = newValue
            engine.replan()
        }
    }

    /// Inserts `item` after `other` (nil: at the end), like AVQueuePlayer. If the audio after
    /// `other` is already decoded, it is flushed from `other`'s end and decoded anew.
    public func insert(_ item: PlayerItem, after other: PlayerItem?) {
        let (entry, items) = catalog.withLock { state in (state.makeEntry(item), state.items) }
        engine.edit { entries in
            let position = other.flatMap { Self.index(of: $0, in: entries, items: items).map { $0 + 1 } } ?? entries.count
            entries.insert(entry, at: position)
        }
    }

    /// Removes `item`. Removing the item that plays advances to the next one.
    public func remove(_ item: PlayerItem) {
        let items = catalog.withLock { $0.items }
        engine.edit { entries in
            if let index = Self.index(of: item, in: entries, items: items) { entries.remove(at: index) }
        }
    }

    /// Moves `item` after `other` (nil: to the end): the queue reordered while playing.
    public func move(_ item: PlayerItem, after other: PlayerItem?) {
        let items = catalog.withLock { $0.items }
        engine.edit { entries in
            guard let from = Self.index(of: item, in: entries, items: items) else { return }
            let entry = entries.remove(at: from)
            let position = other.flatMap { Self.index(of: $0, in: entries, items: items).map { $0 + 1 } } ?? entries.count
            entries.insert(entry, at: position)
        }
    }

    /// Ends the current item now (at the device's read position plus `editLead`) and plays
    /// the next one; the end of the queue if there is none. At a hold (`actionAtItemEnd`
    /// none) the next item plays at once.
    public func advanceToNextItem() {
        if source.isHeldAtItemEnd {
            source.releaseHold()
            return
        }
        engine.advanceToNextItem()
    }

    /// Synchronizes playback with an external timeline, like AVPlayer's
    /// `setRate(_:time:atHostTime:)`: from host time `hostTime` (CLOCK_MONOTONIC of the device's
    /// clock) the player plays at `rate` (0 or 1), to the device frame; with `time`, the current
    /// item is cued at that time of its own first (playback pauses at once until `hostTime`).
    ///
    /// Fails when automatic waiting is on (the player could not promise to be playing at
    /// `hostTime`), before `play(on:)`, or when `hostTime` is sooner than the device's buffer.
    public func setRate(_ rate: Double, time: MediaTime? = nil, atHostTime hostTime: Int64) throws(PlayerError) {
        if configuration.automaticallyWaitsToMinimizeStalling {
            throw PlayerError(.automaticWaitingIsOn, "setRate(_:time:atHostTime:) needs automaticallyWaitsToMinimizeStalling off: with automatic waiting the player cannot promise to play at a given host time")
        }
        guard rate == 0 || rate == 1 else { throw PlayerError(.unsupportedRate, "rate \(rate): only 0 and 1 are supported") }
        guard let device = shared.withLock({ $0.deviceStarted ? $0.device : nil }) else {
            throw PlayerError(.notStarted, "setRate(_:time:atHostTime:): the player has not started; call play(on:) first")
        }
        let now = device.position()
        let sampleRate = Int64(outputFormat.sampleRate)
        let frame = now.framesEmitted + WideMath.multiplyDivide(hostTime - now.hostTime, sampleRate, 1_000_000_000, rounding: .toNearestOrAwayFromZero)
        let earliest = now.framesEmitted + Int64(device.bufferFrames + device.periodFrames)
        guard frame >= earliest else {
            let lead = Double(earliest - now.framesEmitted) / Double(sampleRate) * 1000
            throw PlayerError(.hostTimeTooSoon, "setRate(_:time:atHostTime:): host time \(hostTime) is too soon; the device needs \(String(format: "%.1f", lead)) ms of lead")
        }
        if rate == 1, let time {
            source.setPaused(true)
            engine.seek(to: time)
        }
        shared.withLock { $0.rate = rate }
        source.schedule(playing: rate == 1, atDeviceFrame: frame)
    }

    /// Waits (5 s at most) until the producer has decoded `frames` frames of the timeline, or
    /// finished; returns how many it has. A test hook, for tests that edit what is already decoded.
    @_spi(Testing) public func waitUntilDecoded(frames: Int) -> Int {
        // 500 waits of at most 10 ms each.
        for _ in 0..<500 where source.ring.totalFramesWritten < frames && !source.isFinished {
            source.waitForWrites(beyond: source.ring.totalFramesWritten, timeoutNanoseconds: 10_000_000)
        }
        return source.ring.totalFramesWritten
    }

    /// Now on the clock of the device played on: every host time the player reports is on it.
    private func hostNow() -> Int64 {
        shared.withLock { $0.device }?.clock.now() ?? 0
    }

    // MARK: State

    /// The desired rate: 1 after `play`/`resume`, 0 after `pause`.
    public var rate: Double { shared.withLock { $0.rate } }
    /// The rate at which the timeline actually moves: 0 while paused or waiting.
    public var timebaseRate: Double { timeControlStatus == .playing ? 1 : 0 }
    public var timeControlStatus: TimeControlStatus { shared.withLock { $0.status } }
    public var reasonForWaitingToPlay: WaitingReason? { shared.withLock { $0.waitingReason } }
    /// The current item's buffering.
    public var bufferingState: ItemBufferingState { shared.withLock { $0.buffering } }

    /// Items started so far, with their timeline positions; for progress displays.
    public var startedItems: [ItemOutcome] { engine.outcomes }

    /// The playhead on the queue's timeline (output frames), as heard now.
    public var playheadFrame: Int64 {
        let (device, timeline) = shared.withLock { ($0.device, $0.timeline) }
        guard let device else { return 0 }
        return timeline.mediaFrame(atDeviceFrame: device.position().framesEmitted)
    }

    /// The playhead as a media time on the queue's timeline.
    public var currentTime: MediaTime { MediaTime(frame: playheadFrame, sampleRate: outputFormat.sampleRate) }

    // MARK: Observers

    /// Every `PlayerEvent` from now on, in order, until playback ends.
    public func events() -> AsyncStream<PlayerEvent> {
        let (stream, continuation) = AsyncStream<PlayerEvent>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        shared.withLock { $0.subscribers[id] = continuation }
        continuation.onTermination = { [weak self] _ in self?.shared.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        return stream
    }

    /// The playhead every `interval` of queue time while it moves (AVPlayer's periodic time
    /// observer), yielded when that time is heard.
    public func periodicTimes(interval: MediaTime) -> AsyncStream<MediaTime> {
        let frames = max(1, interval.frame(atSampleRate: outputFormat.sampleRate))
        return addTimeObserver(TimeObserverSpec(interval: frames, boundaries: []))
    }

    /// Each of `times` (queue time) once, when it is heard (AVPlayer's boundary time observer).
    public func boundaryTimes(_ times: [MediaTime]) -> AsyncStream<MediaTime> {
        let frames = times.map { $0.frame(atSampleRate: outputFormat.sampleRate) }.sorted()
        return addTimeObserver(TimeObserverSpec(interval: nil, boundaries: frames))
    }

    private struct TimeObserverSpec {
        var interval: Int64?
        var boundaries: [Int64]
    }

    private func addTimeObserver(_ spec: TimeObserverSpec) -> AsyncStream<MediaTime> {
        let (stream, continuation) = AsyncStream<MediaTime>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        let observer = TimeObserver(continuation: continuation, interval: spec.interval, boundaries: spec.boundaries,
                                    next: spec.interval.map { _ in 0 } ?? spec.boundaries.first ?? .max)
        shared.withLock { $0.timeObservers[id] = observer }
        continuation.onTermination = { [weak self] _ in self?.shared.withLock { _ = $0.timeObservers.removeValue(forKey: id) } }
        return stream
    }

    // MARK: Network progress

    private func publishNetworkProgress(_ decoder: AudioFileDecoder?) {
        let network = decoder.flatMap { decoder -> ItemNetwork? in
            guard let byteSource = decoder.byteSource, let position = decoder.bytePosition else { return nil }
            var byteRate = decoder.info.bitRate.map { Double($0) / 8 }
            if let length = byteSource.length, let duration = decoder.info.duration, duration > .zero {
                byteRate = Double(length) / duration.seconds
            }
            return ItemNetwork(source: byteSource, bytePosition: position, bytesPerMediaSecond: byteRate)
        }
        shared.withLock { $0.itemNetwork = network }
    }

    // MARK: Supervisor

    private func emit(_ event: PlayerEvent) {
        onEvent?(event)
        let subscribers = shared.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers {
            subscriber.yield(event)
            if case .ended = event { subscriber.finish() }
        }
    }

    /// Evaluates buffering for the current item. `firstFillFrames`: frames the device takes at
    /// once when it starts (its whole buffer), which must be buffered on top of the preroll.
    private func evaluateBuffering(firstFillFrames: Int = 0) -> (state: ItemBufferingState, waitingReason: WaitingReason?) {
        let rate = Double(outputFormat.sampleRate)
        let network = shared.withLock { $0.itemNetwork }
        let byteState = network.map { $0.source.bufferingState(from: $0.bytePosition) }
        var toDownload: Int64? = nil
        if let network, let byteState, let length = network.source.length {
            toDownload = max(0, length - network.bytePosition - byteState.bytesAhead)
        }
        let evaluation = BufferingEvaluation(
            ringSeconds: Double(source.ring.readableFrames) / rate,
            ringIsFull: source.ring.readableFrames >= source.ring.capacityFrames - 4096,
            producerFinished: engine.isFinished,
            network: byteState, bytesPerMediaSecond: network?.bytesPerMediaSecond, bytesToDownload: toDownload)
        let minimum = network == nil ? configuration.prerollDuration : configuration.networkPrerollDuration
        return evaluation.evaluate(minimumAhead: prerollSeconds(minimum, firstFillFrames: firstFillFrames))
    }

    /// A preroll in seconds, capped at half the ring so a small ring can still start.
    ///
    /// Before the device starts, its first fill comes on top: a card fills its whole buffer
    /// (200 ms on ALSA's default devices) the moment it starts, faster than real time, so with
    /// only the preroll buffered a producer slowed by a busy machine left the ring empty 160 ms
    /// in and the player stalled, a gap in the music, before a single frame had been heard.
    private func prerollSeconds(_ duration: MediaTime, firstFillFrames: Int = 0) -> Double {
        let rate = Double(outputFormat.sampleRate)
        return min(duration.seconds + Double(firstFillFrames) / rate, Double(source.ring.capacityFrames) / rate / 2)
    }

    /// A display-rate loop, off the audio path: starts the device when playback is likely to
    /// keep up, ends stall holds, and turns the timebase log and device positions into events
    /// stamped with the exact host time of the device frame they concern.
    private func supervise(_ device: any OutputDevice) {
        let rate = Double(outputFormat.sampleRate)
        var announced = 0
        var endsReported = 0
        var failuresReported = Set<String>()
        var stalls = 0
        var pending: [Transition] = []
        var lastBufferingFlags: [Bool] = []
        var record = [Int64](repeating: 0, count: 3)
        var announcedPlaying = false
        let autoWait = configuration.automaticallyWaitsToMinimizeStalling
        func hostTime(ofFrame frame: Int64, _ position: DevicePosition) -> Int64 {
            position.hostTime + Int64((Double(frame - position.framesEmitted) * 1e9 / rate).rounded())
        }
        func setStatus(_ status: TimeControlStatus, _ reason: WaitingReason?, at time: Int64) {
            let changed = shared.withLock { state -> Bool in
                guard state.status != status || state.waitingReason != reason else { return false }
                state.status = status
                state.waitingReason = reason
                return true
            }
            if changed { emit(.status(status, reason: reason, hostTime: time)) }
        }

        while true {
            let stopping = stopRequested.load(ordering: .acquiring)
            let started = shared.withLock { $0.deviceStarted }
            let evaluation = evaluateBuffering(firstFillFrames: started ? 0 : device.bufferFrames)
            let now = started ? device.position() : DevicePosition(framesEmitted: 0, hostTime: device.clock.now())
            if evaluation.state.flags != lastBufferingFlags {
                lastBufferingFlags = evaluation.state.flags
                emit(.buffering(evaluation.state, hostTime: now.hostTime))
            }
            shared.withLock { $0.buffering = evaluation.state }

            if !started {
                if stopping { return }
                let ready = autoWait ? evaluation.state.isPlaybackLikelyToKeepUp
                                     : (engine.isFinished || Double(source.ring.readableFrames) / rate >= prerollSeconds(configuration.prerollDuration, firstFillFrames: device.bufferFrames))
                let nothingToPlay = engine.isFinished && source.ring.readableFrames == 0
                if nothingToPlay {
                    // Every item failed: report them and end without starting the device.
                    reportItems(position: now, announced: &announced, endsReported: &endsReported, failuresReported: &failuresReported, hostTime: hostTime)
                    setStatus(.waitingToPlayAtSpecifiedRate, .noItemToPlay, at: now.hostTime)
                    setStatus(.paused, nil, at: now.hostTime)
                    emit(.ended(hostTime: now.hostTime))
                    finishTimeObservers()
                    return
                } else if ready {
                    do throws(DeviceError) {
                        try device.start(source: source)
                        shared.withLock { $0.deviceStarted = true }
                    } catch {
                        shared.withLock { $0.startError = error }
                        source.cancel()
                        engine.stop()
                        return
                    }
                } else {
                    setStatus(.waitingToPlayAtSpecifiedRate, evaluation.waitingReason ?? .evaluatingBufferingRate, at: now.hostTime)
                }
            } else {
                // Timebase changes, in device order; each is reported when it is heard.
                while record.withUnsafeMutableBufferPointer({ source.transitions.read(into: $0.baseAddress!, frames: 1) }) == 1 {
                    let transition = Transition(deviceFrame: record[0], mediaFrame: record[1], kind: Transition.Kind(rawValue: record[2]) ?? .playing)
                    pending.append(transition)
                    shared.withLock { $0.timeline.append(transition) }
                }
                if !announcedPlaying && (now.framesEmitted > 0 || device.isFinished) {
                    announcedPlaying = true
                    setStatus(.playing, nil, at: hostTime(ofFrame: 0, now))
                }
                while let first = pending.first, first.deviceFrame <= now.framesEmitted || device.isFinished {
                    pending.removeFirst()
                    let time = hostTime(ofFrame: first.deviceFrame, now)
                    switch first.kind {
                    case .playing: setStatus(.playing, nil, at: time)
                    case .paused: setStatus(.paused, nil, at: time)
                    case .stalled:
                        stalls += 1
                        emit(.stalled(stalls: stalls, hostTime: time))
                        setStatus(.waitingToPlayAtSpecifiedRate, autoWait ? (evaluation.waitingReason ?? .toMinimizeStalls) : .toMinimizeStalls, at: time)
                    case .pausedAtItemEnd:
                        if source.isPaused { shared.withLock { $0.rate = 0 } }
                        setStatus(.paused, nil, at: time)
                    case .heldAtItemEnd, .ended: break
                    }
                }
                if source.isHoldingAfterStall && evaluation.state.isPlaybackLikelyToKeepUp && !stopping {
                    source.resumeAfterStall()
                }
                reportItems(position: now, announced: &announced, endsReported: &endsReported, failuresReported: &failuresReported, hostTime: hostTime)
                notifyTimeObservers(position: now)
                if device.isFinished {
                    // The device may have finished after `now` was read: report what its last
                    // frames ended (the last item's end) from its final position.
                    let final = device.position()
                    reportItems(position: final, announced: &announced, endsReported: &endsReported, failuresReported: &failuresReported, hostTime: hostTime)
                    notifyTimeObservers(position: final)
                    setStatus(.paused, nil, at: final.hostTime)
                    emit(.ended(hostTime: final.hostTime))
                    finishTimeObservers()
                    return
                }
            }
            if !shared.withLock({ $0.deviceStarted }) && !engine.isFinished {
                // Waiting to start: look again as soon as more audio is decoded (start latency).
                source.waitForWrites(beyond: source.ring.totalFramesWritten, timeoutNanoseconds: 5_000_000)
            } else {
                var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
                nanosleep(&pause, nil)  // display-rate polling; the times reported come from the device
            }
        }
    }

    /// Items are reported when their first frame is emitted, with that frame's exact host time.
    private func reportItems(position: DevicePosition, announced: inout Int, endsReported: inout Int, failuresReported: inout Set<String>,
                             hostTime: (Int64, DevicePosition) -> Int64) {
        let items = engine.outcomes
        for item in items where item.error != nil || item.info == nil {
            let key = "\(item.pass)/\(item.tag)/\(item.startFrame)"
            if failuresReported.insert(key).inserted { emit(.itemFailed(item, hostTime: position.hostTime)) }
        }
        // Items that put frames on the timeline, and the one being decoded (an item cut to
        // nothing adds none: it neither starts nor ends).
        let playable = items.enumerated().filter { index, item in
            item.info != nil && (item.frameCount > 0 || (item.error == nil && index == items.count - 1))
        }.map(\.element)
        let timeline = shared.withLock { $0.timeline }
        // Starts and ends in the order they are heard: an item's end (its last frame is out;
        // the frame after it may come much later, after a pause at the item's end) before the
        // next item's start.
        while true {
            if endsReported < announced, playable[endsReported].frameCount > 0,
               let last = timeline.deviceFrame(forMediaFrame: playable[endsReported].startFrame + playable[endsReported].frameCount - 1),
               last < position.framesEmitted {
                emit(.itemEnded(playable[endsReported], hostTime: hostTime(last + 1, position)))
                endsReported += 1
            } else if announced < playable.count, endsReported == announced,
                      let frame = timeline.deviceFrame(forMediaFrame: playable[announced].startFrame), frame <= position.framesEmitted {
                emit(.itemStarted(playable[announced], hostTime: hostTime(frame, position)))
                announced += 1
            } else {
                break
            }
        }
    }

    private func notifyTimeObservers(position: DevicePosition) {
        let (timeline, observers) = shared.withLock { ($0.timeline, $0.timeObservers) }
        guard !observers.isEmpty else { return }
        let heard = timeline.mediaFrame(atDeviceFrame: position.framesEmitted)
        var updated: [UUID: TimeObserver] = [:]
        for (id, var observer) in observers {
            while observer.next <= heard {
                observer.continuation.yield(MediaTime(frame: observer.next, sampleRate: outputFormat.sampleRate))
                if let interval = observer.interval {
                    observer.next += interval
                } else {
                    observer.boundaries.removeFirst()
                    observer.next = observer.boundaries.first ?? .max
                }
            }
            updated[id] = observer
        }
        shared.withLock { state in
            for (id, observer) in updated where state.timeObservers[id] != nil { state.timeObservers[id] = observer }
        }
    }

    private func finishTimeObservers() {
        let observers = shared.withLock { state -> [TimeObserver] in
            defer { state.timeObservers.removeAll() }
            return Array(state.timeObservers.values)
        }
        for observer in observers { observer.continuation.finish() }
    }
}
