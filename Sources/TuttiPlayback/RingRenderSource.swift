import Synchronization
import TuttiCore
import TuttiDevices

/// The hand-off between the producer (decode + resample, any thread) and the device's render
/// thread: a preallocated lock-free ring, an end-of-stream flag, and the player's timebase.
///
/// The timebase: frames read from the ring are the queue's media timeline. When the player is
/// paused, or the ring runs dry (a stall), the source plays silence and the media timeline stands
/// still; every such change is logged, with the device frame at which it is heard, into a
/// lock-free `transitions` ring that the player's supervisor reads. After a stall the source
/// holds until `resumeAfterStall()` — the supervisor calls it once playback is likely to keep
/// up (automatic waiting) — or, without automatic waiting, resumes as soon as frames arrive.
///
/// Thread-safety: one producer thread calls `write`/`finish`; the device's render thread calls
/// `render`; the supervisor reads `transitions` and calls `setPaused`/`resumeAfterStall`.
/// `render` never allocates, locks or blocks; it wakes a waiting producer through a `WakeSignal`.
public final class RingRenderSource: RenderSource, @unchecked Sendable {
    public let ring: AudioRing
    /// Whether the device is paced by a clock. An offline device (`wav:`) waits for data
    /// instead, so it never stalls and never gets silence inserted. Set before the device starts.
    public var isPaced: Bool {
        get { paced.load(ordering: .acquiring) }
        set { paced.store(newValue, ordering: .releasing) }
    }
    private let paced: Atomic<Bool>
    /// Whether a stall holds until `resumeAfterStall()` (automatic waiting) rather than
    /// resuming with the next frames that arrive.
    public let waitsAfterStall: Bool
    /// Timebase changes: records of (`deviceFrame`, `mediaFrame`, `Transition.Kind` raw value).
    public let transitions = SPSCRing<Int64>(channelCount: 3, capacityFrames: 1024, zero: 0)

    private let ended = Atomic<Bool>(false)
    private let paused = Atomic<Bool>(false)
    private let stalled = Atomic<Bool>(false)
    private let spaceAvailable = WakeSignal()
    private let dataAvailable = WakeSignal()
    private let stopRequested = Atomic<Bool>(false)
    // Render-thread state.
    private var silent = false
    private let record = UnsafeMutablePointer<Int64>.allocate(capacity: 3)

    public init(channelCount: Int, capacityFrames: Int, isPaced: Bool = true, waitsAfterStall: Bool = true) {
        ring = AudioRing(channelCount: channelCount, capacityFrames: capacityFrames)
        record.initialize(repeating: 0, count: 3)
        paced = Atomic(isPaced)
        self.waitsAfterStall = waitsAfterStall
    }

    deinit { record.deallocate() }

    // MARK: Render thread

    public func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        let channels = ring.channelCount
        guard isPaced else { return renderOffline(into: buffer, frameCount: frameCount) }
        let hold = paused.load(ordering: .acquiring) || stalled.load(ordering: .acquiring)
        let isEnded = ended.load(ordering: .acquiring)
        if hold || (silent && ring.readableFrames == 0 && !isEnded) {
            if !silent {
                silent = true
                log(deviceFrame, paused.load(ordering: .relaxed) ? .paused : .stalled)
            }
            buffer.update(repeating: 0, count: frameCount * channels)
            return RenderResult(frames: frameCount, endOfStream: false)
        }
        if silent {
            silent = false
            log(deviceFrame, .playing)
        }
        var frames = ring.read(into: buffer, frames: frameCount)
        spaceAvailable.signal()
        if frames < frameCount {
            if ended.load(ordering: .acquiring) {
                // Re-read after seeing the flag: the producer's last frames precede it.
                frames += ring.read(into: buffer + frames * channels, frames: frameCount - frames)
                if ring.readableFrames == 0 {
                    log(deviceFrame + Int64(frames), .ended)
                    return RenderResult(frames: frames, endOfStream: true)
                }
            }
            if frames < frameCount {
                // A stall: the rest of the period is silence, and the timebase stops here.
                buffer.advanced(by: frames * channels).update(repeating: 0, count: (frameCount - frames) * channels)
                silent = true
                if waitsAfterStall { stalled.store(true, ordering: .releasing) }
                log(deviceFrame + Int64(frames), .stalled)
            }
        }
        return RenderResult(frames: frameCount, endOfStream: false)
    }

    private func renderOffline(into buffer: UnsafeMutablePointer<Float>, frameCount: Int) -> RenderResult {
        let frames = ring.read(into: buffer, frames: frameCount)
        spaceAvailable.signal()
        if frames < frameCount && ended.load(ordering: .acquiring) {
            let more = ring.read(into: buffer + frames * ring.channelCount, frames: frameCount - frames)
            return RenderResult(frames: frames + more, endOfStream: ring.readableFrames == 0)
        }
        return RenderResult(frames: frames, endOfStream: false)
    }

    private func log(_ deviceFrame: Int64, _ kind: Transition.Kind) {
        record[0] = deviceFrame
        record[1] = Int64(ring.totalFramesRead)
        record[2] = kind.rawValue
        // Full only if the supervisor stopped reading; a lost record then harms nobody.
        _ = transitions.write(record, frames: 1)
    }

    public func waitForFrames(timeoutNanoseconds: Int64) {
        dataAvailable.prepareToWait()
        if ring.readableFrames > 0 || ended.load(ordering: .acquiring) { dataAvailable.signal(); return }
        dataAvailable.wait(timeoutNanoseconds: timeoutNanoseconds)
    }

    // MARK: Supervisor

    /// Blocks until the producer writes past `frames` frames in total (or finishes), or the
    /// timeout passes: lets a waiting start react to the preroll at once, without polling.
    public func waitForWrites(beyond frames: Int, timeoutNanoseconds: Int64) {
        dataAvailable.prepareToWait()
        if ring.totalFramesWritten > frames || ended.load(ordering: .acquiring) { dataAvailable.signal(); return }
        dataAvailable.wait(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// Pauses (silence, timebase stopped) or unpauses at the next period.
    public func setPaused(_ value: Bool) { paused.store(value, ordering: .releasing) }

    /// Ends a stall hold: playback resumes at the next period.
    public func resumeAfterStall() { stalled.store(false, ordering: .releasing) }

    /// Whether a stall is holding playback.
    public var isHoldingAfterStall: Bool { stalled.load(ordering: .acquiring) }

    /// Whether the producer has finished (everything is in the ring or played).
    public var isFinished: Bool { ended.load(ordering: .acquiring) }

    // MARK: Producer thread

    /// Writes all `frames` frames, waiting for room as the device drains the ring.
    /// Returns false if `cancel()` was called before everything was written.
    @discardableResult
    public func write(_ samples: UnsafePointer<Float>, frames: Int) -> Bool {
        var done = 0
        while done < frames {
            done += ring.write(samples + done * ring.channelCount, frames: frames - done)
            dataAvailable.signal()
            if done < frames {
                if stopRequested.load(ordering: .acquiring) { return false }
                spaceAvailable.prepareToWait()
                if ring.writableFrames == 0 { spaceAvailable.wait(timeoutNanoseconds: 100_000_000) }
            }
        }
        return true
    }

    public func write(_ samples: [Float]) -> Bool {
        samples.withUnsafeBufferPointer { write($0.baseAddress!, frames: $0.count / ring.channelCount) }
    }

    /// No more frames will come; the device ends once it has played what the ring holds.
    public func finish() {
        ended.store(true, ordering: .releasing)
        dataAvailable.signal()
    }

    /// Unblocks a producer waiting for room (used on stop).
    public func cancel() {
        stopRequested.store(true, ordering: .releasing)
        spaceAvailable.signal()
    }
}

/// One change of the player's timebase, as heard: at device frame `deviceFrame` the media
/// timeline (frames of the queue) is at `mediaFrame` and from there on runs or stands still.
public struct Transition: Sendable, Equatable {
    public enum Kind: Int64, Sendable {
        case playing = 0, paused = 1, stalled = 2, ended = 3
    }
    public var deviceFrame: Int64
    public var mediaFrame: Int64
    public var kind: Kind
}
