import Dispatch
import Foundation
import Synchronization
import TuttiCore
import TuttiDevices

/// Owns a media timeline and plays its renderers on one output device in step with it:
/// Tutti's AVSampleBufferRenderSynchronizer.
///
/// The timeline maps device frames to media time: `setRate(1, time: t, atHostTime: h)` makes
/// media time `t` play exactly at host time `h` (the device frame emitted then), sample-exact;
/// rate 0 stands still. From the device's position reports (frames emitted and the host time of
/// the last one) `currentTime()`, `time(atHostTime:)` and `hostTime(forMediaTime:)` convert
/// between host time and media time, so video or anything else can follow the audio.
///
/// The device starts when the synchronizer is made and plays silence while the timeline stands
/// still or no renderer has media; `stop()` ends it. It must be a paced device (a sound card,
/// `virtual`, `null`): the timeline runs on its clock. Up to 8 renderers are mixed (summed),
/// each in the device's format.
///
/// Host times are CLOCK_MONOTONIC nanoseconds of the device's reporting clock, the clock of
/// `DevicePosition.hostTime`, extrapolated at the device's nominal rate from its latest position
/// report.
///
/// Thread-safety: every method may be called from any thread; changes are serialised. The
/// render thread touches only preallocated, lock-free state.
public final class RenderSynchronizer: @unchecked Sendable {
    public let device: any OutputDevice
    let core: SynchronizerCore
    private let source: SynchronizerRenderSource

    private let lock = NSLock()
    private var attached: [SampleBufferRenderer] = []
    private var desiredRate: Double = 0
    private var stopped = false

    private let feederStopped = Atomic<Bool>(false)
    private let feederDone = DispatchSemaphore(value: 0)

    private let observerLock = NSLock()
    private var observers = SynchronizerTimeObservers()
    private let observerQueue = DispatchQueue(label: "tutti.synchronizer.observers")
    private var observerTimer: DispatchSourceTimer?

    /// Starts `device`, playing silence until the timeline runs and renderers have media.
    /// - Throws: the device's error if it cannot start.
    public init(device: any OutputDevice) throws(DeviceError) {
        self.device = device
        core = SynchronizerCore(device: device)
        source = SynchronizerRenderSource(core: core, channelCount: device.format.channelCount)
        try device.start(source: source)
        let feeder = Thread { [self] in
            // The device plays only the real-time lead this thread has committed.
            FeederPriority.raiseCurrentThread()
            feed()
            feederDone.signal()
        }
        feeder.name = "tutti-feeder"
        feeder.start()
    }

    deinit {
        observerTimer?.cancel()
    }

    // MARK: Renderers

    public var renderers: [SampleBufferRenderer] { lock.withLock { attached } }

    /// Adds a renderer: it plays on this synchronizer's timeline from now on.
    /// A renderer belongs to one synchronizer at a time, and its format must be the device's.
    public func addRenderer(_ renderer: SampleBufferRenderer) {
        lock.withLock {
            precondition(renderer.format.sampleRate == device.format.sampleRate && renderer.format.channelCount == device.format.channelCount,
                         "renderer format \(renderer.format) does not match the device's \(device.format)")
            precondition(!attached.contains { $0 === renderer }, "renderer added twice")
            let placed = source.attach(renderer.ring)
            precondition(placed, "a synchronizer mixes at most \(SynchronizerRenderSource.maximumRenderers) renderers")
            renderer.attach(to: core)
            attached.append(renderer)
        }
        source.feederWake.signal()
    }

    /// Removes a renderer: it falls silent from the next period on. Returns once the render
    /// thread has let go of it (a period or two); its enqueued media stays enqueued.
    public func removeRenderer(_ renderer: SampleBufferRenderer) {
        lock.withLock {
            guard let index = attached.firstIndex(where: { $0 === renderer }) else { return }
            attached.remove(at: index)
            source.detach(renderer.ring)
            renderer.detach()
        }
    }

    // MARK: Rate and time

    /// The rate last set: 0 (standing still) or 1 (playing).
    public var rate: Double { lock.withLock { desiredRate } }

    /// Sets the rate, keeping the timeline's time: pause (0) or resume (1) where it stands.
    /// Takes effect as soon as the device can still change its output: a period and 20 ms
    /// after what it has already pulled (if the calling thread stalls longer than that between
    /// reading the device and publishing the change, the first frames of it come late).
    /// - Throws: `.unsupportedRate` for rates other than 0 and 1; `.stopped` after `stop()`.
    public func setRate(_ rate: Double) throws(RenderSynchronizerError) {
        try change(rate: rate, time: nil, hostTime: nil)
    }

    /// Sets the rate and moves the timeline to `time`, as soon as the device can still change
    /// its output (a period or two after what it has already pulled): `time` is heard at
    /// `hostTime(forMediaTime: time)`, shortly after now.
    /// - Throws: `.unsupportedRate` for rates other than 0 and 1 (no time-stretching);
    ///   `.stopped` after `stop()`.
    public func setRate(_ rate: Double, time: MediaTime) throws(RenderSynchronizerError) {
        try change(rate: rate, time: time, hostTime: nil)
    }

    /// Sets the rate and media time `time` to take effect exactly at host time `hostTime`
    /// (CLOCK_MONOTONIC ns on the device's clock, as `DevicePosition.hostTime`): the device frame
    /// emitted at that host time (to the nearest frame) plays media time `time`; until then the
    /// timeline goes on as it was (e.g. silence before a start). For a host time too close for
    /// the device (within what it has already pulled, a few periods), what it pulled plays as it
    /// was and the renderers join the new timeline where it has got to: the timeline stays
    /// exact, the media before that point is not heard.
    /// - Throws: `.unsupportedRate` for rates other than 0 and 1 (no time-stretching);
    ///   `.stopped` after `stop()`.
    public func setRate(_ rate: Double, time: MediaTime, atHostTime hostTime: Int64) throws(RenderSynchronizerError) {
        try change(rate: rate, time: time, hostTime: hostTime)
    }

    private func change(rate: Double, time: MediaTime?, hostTime: Int64?) throws(RenderSynchronizerError) {
        guard rate == 0 || rate == 1 else { throw .unsupportedRate(rate) }
        do {
            lock.lock()
            defer { lock.unlock() }
            guard !stopped else { throw RenderSynchronizerError.stopped }
            let position = device.position()
            let deviceFrame: Int64
            if let hostTime {
                deviceFrame = core.deviceFrame(atHostTime: hostTime, from: position)
            } else {
                // The render thread may be inside the period it has announced; a period and
                // 20 ms more leave room for this thread to publish the change before it gets there.
                deviceFrame = core.renderPosition.load(ordering: .acquiring) + Int64(device.periodFrames) + Int64(core.sampleRate / 50)
            }
            var timeline = core.timeline
            let startTime = time ?? timeline.time(atDeviceFrame: deviceFrame)
            _ = timeline.set(rate: Int(rate), time: startTime, atDeviceFrame: deviceFrame)
            // Keep the recent past for the observers, which look every few milliseconds.
            if timeline.anchors.count > 32 { timeline.forget(before: position.framesEmitted - Int64(core.sampleRate)) }
            core.timeline = timeline
            desiredRate = rate
            for renderer in attached { renderer.replan(from: deviceFrame) }
        }
        source.feederWake.signal()
    }

    /// The media time being heard now: the timeline at the frame the device reports emitting.
    public func currentTime() -> MediaTime {
        core.currentTime()
    }

    /// The media time heard at host time `hostTime` (nanosecond resolution), per the current
    /// timeline and the device's latest position report. Before a scheduled start, and while
    /// paused, it is the time the timeline stands at.
    public func time(atHostTime hostTime: Int64) -> MediaTime {
        let position = device.position()
        let timeline = core.timeline
        // Emission times are whole nanoseconds rounded from the frame grid: a nanosecond of
        // slack keeps a frame's own reported time inside that frame.
        let frame = core.deviceFrame(atHostTime: hostTime + 1, from: position, rounding: .down)
        let anchor = timeline.anchor(at: frame)
        if anchor.rate == 0 { return anchor.time }
        let anchorHostTime = core.hostTime(ofDeviceFrame: anchor.deviceFrame, from: position)
        return anchor.time + MediaTime(value: hostTime - anchorHostTime, timescale: 1_000_000_000)
    }

    /// The host time at which media time `time` is heard, per the current timeline (the latest
    /// stretch of it that plays `time`) and the device's latest position report; nil when the
    /// timeline does not play it (paused there, or skipped by a jump).
    public func hostTime(forMediaTime time: MediaTime) -> Int64? {
        let position = device.position()
        let timeline = core.timeline
        let anchors = timeline.anchors
        for index in anchors.indices.reversed() where anchors[index].rate == 1 {
            let anchor = anchors[index]
            guard time >= anchor.time else { continue }
            let offset = time - anchor.time
            if index + 1 < anchors.count {
                let length = MediaTime(frame: anchors[index + 1].deviceFrame - anchor.deviceFrame, sampleRate: core.sampleRate)
                guard offset < length else { continue }
            }
            return core.hostTime(ofDeviceFrame: anchor.deviceFrame, from: position) + offset.nanoseconds
        }
        return nil
    }

    // MARK: Observers

    /// Yields k × `interval` (k = 0, 1, 2, …, exact times) each time the playing timeline
    /// passes one, within a few milliseconds of it being heard. After a jump it goes on from
    /// the new time (inclusive); a pause and resume in place yields nothing twice. Ends when the
    /// stream's consumer stops or the synchronizer stops.
    public func periodicTimes(interval: MediaTime) -> AsyncStream<MediaTime> {
        precondition(interval > .zero, "the interval must be positive")
        let (stream, continuation) = AsyncStream.makeStream(of: MediaTime.self, bufferingPolicy: .unbounded)
        let id = addObserver { observers, timeline, frame in
            observers.addPeriodic(interval: interval, sink: .stream(continuation), timeline: timeline, frame: frame)
        }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(id, finishing: false) }
        return stream
    }

    /// Yields each of `times` once, when the playing timeline passes it (within a few
    /// milliseconds of it being heard), in time order; times the timeline jumps over or had
    /// already passed are not yielded. Ends once all are yielded or skipped, or on `stop()`.
    public func boundaryTimes(_ times: [MediaTime]) -> AsyncStream<MediaTime> {
        let (stream, continuation) = AsyncStream.makeStream(of: MediaTime.self, bufferingPolicy: .unbounded)
        let id = addObserver { observers, timeline, frame in
            observers.addBoundaries(times, sink: .stream(continuation), timeline: timeline, frame: frame)
        }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(id, finishing: false) }
        return stream
    }

    /// A registered callback observer, for `removeTimeObserver(_:)`.
    public struct TimeObserver: Sendable, Hashable {
        fileprivate let id: Int
    }

    /// Calls `block` on `queue` with each time `periodicTimes(interval:)` would yield. The
    /// dispatch-queue form, for callers that must not wait on the Swift concurrency pool.
    public func addPeriodicTimeObserver(forInterval interval: MediaTime, queue: DispatchQueue,
                                        using block: @escaping @Sendable (MediaTime) -> Void) -> TimeObserver {
        precondition(interval > .zero, "the interval must be positive")
        return TimeObserver(id: addObserver { observers, timeline, frame in
            observers.addPeriodic(interval: interval, sink: .callback(queue, block), timeline: timeline, frame: frame)
        })
    }

    /// Calls `block` on `queue` with each of `times` as `boundaryTimes(_:)` would yield it.
    public func addBoundaryTimeObserver(forTimes times: [MediaTime], queue: DispatchQueue,
                                        using block: @escaping @Sendable (MediaTime) -> Void) -> TimeObserver {
        TimeObserver(id: addObserver { observers, timeline, frame in
            observers.addBoundaries(times, sink: .callback(queue, block), timeline: timeline, frame: frame)
        })
    }

    /// No more calls for `observer` after any already dispatched.
    public func removeTimeObserver(_ observer: TimeObserver) {
        removeObserver(observer.id, finishing: true)
    }

    /// Registers an observer from the timeline as it stands now and makes sure the timer runs.
    private func addObserver(_ register: (inout SynchronizerTimeObservers, SynchronizerTimeline, Int64) -> Int) -> Int {
        let frame = device.position().framesEmitted
        let timeline = core.timeline
        let stoppedNow = lock.withLock { stopped }
        let id: Int = observerLock.withLock {
            let id = register(&observers, timeline, frame)
            if observerTimer == nil && !stoppedNow {
                // Display-rate polling of the device position, off the audio path: the times
                // reported are exact media times, not the moments of looking.
                let timer = DispatchSource.makeTimerSource(queue: observerQueue)
                timer.schedule(deadline: .now(), repeating: .milliseconds(5), leeway: .milliseconds(1))
                timer.setEventHandler { [weak self] in self?.observeTick() }
                timer.resume()
                observerTimer = timer
            }
            return id
        }
        if stoppedNow { removeObserver(id, finishing: true) }
        return id
    }

    private func removeObserver(_ id: Int, finishing: Bool) {
        let sink = observerLock.withLock { observers.remove(id) }
        if finishing { sink?.finish() }
    }

    private func observeTick() {
        let frame = device.position().framesEmitted
        let timeline = core.timeline
        let finished = observerLock.withLock {
            let finished = observers.advance(timeline: timeline, to: frame)
            if observers.isEmpty {
                // Nobody is watching: stop polling until the next observer.
                observerTimer?.cancel()
                observerTimer = nil
            }
            return finished
        }
        for sink in finished { sink.finish() }
    }

    // MARK: Feeder

    /// Moves media into the renderers' rings as the device plays and keeps their media
    /// requests going; woken by the render thread every period.
    private func feed() {
        while !feederStopped.load(ordering: .acquiring) {
            source.feederWake.prepareToWait()
            for renderer in renderers {
                renderer.feed()
                renderer.pokeMediaRequest()
            }
            source.feederWake.wait(timeoutNanoseconds: 20_000_000)
        }
    }

    // MARK: Stopping

    /// Stops the device (at once, after its current period), the feeder and the observers,
    /// and joins the device's threads (finalizing a virtual device's capture). Call it when
    /// done: until then the running device and feeder keep the synchronizer alive.
    /// - Throws: the device's error, if it met one.
    public func stop() throws(DeviceError) {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        device.stop()
        feederStopped.store(true, ordering: .releasing)
        source.feederWake.signal()
        feederDone.wait()
        let remaining = observerLock.withLock {
            observerTimer?.cancel()
            observerTimer = nil
            return observers.removeAll()
        }
        for sink in remaining { sink.finish() }
        var failure: DeviceError?
        do { try device.waitUntilFinished() } catch { failure = error }
        // The render thread has ended: the rings can go at once.
        for renderer in renderers { removeRenderer(renderer) }
        if let failure { throw failure }
    }
}
