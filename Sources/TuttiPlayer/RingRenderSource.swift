import Foundation
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiMedia

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
    private let held = Atomic<Bool>(false)
    private let spaceAvailable = WakeSignal()
    private let dataAvailable = WakeSignal()
    private let stopRequested = Atomic<Bool>(false)
    /// Ring frames at or beyond it are not read: set while the producer truncates the ring.
    private let fence = Atomic<Int>(.max)
    /// True while `render` runs; with `fence`, lets the producer know when no render can read
    /// beyond a new fence (both sequentially consistent: a Dekker-style hand-shake).
    private let inRender = Atomic<Bool>(false)
    /// The next item-end stop (a ring frame; `.max`: none) and whether it holds or pauses.
    private let stopFrame = Atomic<Int>(.max)
    private let stopHolds = Atomic<Bool>(false)
    /// A change of rate at a device frame (`setRate(_:time:atHostTime:)`); `.max`: none.
    private let scheduledFrame = Atomic<Int64>(.max)
    private let scheduledPlaying = Atomic<Bool>(false)
    // Render-thread state.
    private var silent = false
    private var stoppedAtItemEnd = false
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
        inRender.store(true, ordering: .sequentiallyConsistent)
        defer { inRender.store(false, ordering: .releasing) }
        guard isPaced else { return renderOffline(into: buffer, frameCount: frameCount) }
        // A scheduled change of rate splits the period at its device frame, to the sample.
        var done = 0
        while done < frameCount {
            let at = deviceFrame + Int64(done)
            var span = frameCount - done
            let scheduled = scheduledFrame.load(ordering: .acquiring)
            if scheduled != .max {
                if scheduled <= at {
                    paused.store(!scheduledPlaying.load(ordering: .relaxed), ordering: .releasing)
                    scheduledFrame.store(.max, ordering: .releasing)
                } else if scheduled < deviceFrame + Int64(frameCount) {
                    span = Int(scheduled - at)
                }
            }
            let result = renderSpan(into: buffer + done * ring.channelCount, frameCount: span, deviceFrame: at)
            if result.endOfStream { return RenderResult(frames: done + result.frames, endOfStream: true) }
            done += span
        }
        return RenderResult(frames: frameCount, endOfStream: false)
    }

    /// Frames the render thread may read now: what the ring holds, up to the fence and the next stop.
    private func readableNow() -> Int {
        let limit = min(fence.load(ordering: .sequentiallyConsistent), stopFrame.load(ordering: .acquiring))
        return max(0, min(ring.readableFrames, limit - ring.totalFramesRead))
    }

    /// Takes the item-end stop if the ring's read position has reached it.
    private func takeStopIfReached(deviceFrame: Int64) {
        let stop = stopFrame.load(ordering: .acquiring)
        guard stop != .max, ring.totalFramesRead >= stop else { return }
        let holds = stopHolds.load(ordering: .relaxed)
        stopFrame.store(.max, ordering: .releasing)
        if holds { held.store(true, ordering: .releasing) } else { paused.store(true, ordering: .releasing) }
        stoppedAtItemEnd = true
        if !silent {
            silent = true
            log(deviceFrame, holds ? .heldAtItemEnd : .pausedAtItemEnd)
        }
    }

    private func renderSpan(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        let channels = ring.channelCount
        takeStopIfReached(deviceFrame: deviceFrame)
        let hold = paused.load(ordering: .acquiring) || stalled.load(ordering: .acquiring) || held.load(ordering: .acquiring)
        let isEnded = ended.load(ordering: .acquiring)
        let available = readableNow()
        if stoppedAtItemEnd && isEnded && ring.readableFrames == 0 {
            // Stopped at the end of the last item: the queue is over.
            log(deviceFrame, .ended)
            return RenderResult(frames: 0, endOfStream: true)
        }
        if hold || (silent && available == 0 && !isEnded) {
            if !silent {
                silent = true
                log(deviceFrame, paused.load(ordering: .relaxed) ? .paused : .stalled)
            }
            buffer.update(repeating: 0, count: frameCount * channels)
            return RenderResult(frames: frameCount, endOfStream: false)
        }
        if silent {
            silent = false
            stoppedAtItemEnd = false
            log(deviceFrame, .playing)
        }
        var frames = ring.read(into: buffer, frames: min(frameCount, available))
        spaceAvailable.signal()
        if frames < frameCount {
            if stopFrame.load(ordering: .acquiring) <= ring.totalFramesRead {
                // An item-end stop inside the period: the rest is silence.
                buffer.advanced(by: frames * channels).update(repeating: 0, count: (frameCount - frames) * channels)
                takeStopIfReached(deviceFrame: deviceFrame + Int64(frames))
                return RenderResult(frames: frameCount, endOfStream: false)
            }
            if ended.load(ordering: .acquiring) {
                // Re-read after seeing the flag: the producer's last frames precede it.
                frames += ring.read(into: buffer + frames * channels, frames: min(frameCount - frames, readableNow()))
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
        let frames = ring.read(into: buffer, frames: min(frameCount, readableNow()))
        spaceAvailable.signal()
        if frames < frameCount && ended.load(ordering: .acquiring) {
            let more = ring.read(into: buffer + frames * ring.channelCount, frames: min(frameCount - frames, readableNow()))
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
        if readableNow() > 0 || ended.load(ordering: .acquiring) { dataAvailable.signal(); return }
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

    /// Ends a hold at an item end (`actionAtItemEnd` none): the next item plays at the next period.
    public func releaseHold() { held.store(false, ordering: .releasing) }

    /// Whether playback holds at the end of an item.
    public var isHeldAtItemEnd: Bool { held.load(ordering: .acquiring) }

    /// Whether the source is paused (by `setPaused`, a pausing item-end stop, or a scheduled change).
    public var isPaused: Bool { paused.load(ordering: .acquiring) }

    /// Plays (`playing`) or pauses from device frame `deviceFrame` on, to the sample; a frame
    /// already past applies at the next period. Replaces an earlier schedule.
    public func schedule(playing: Bool, atDeviceFrame deviceFrame: Int64) {
        scheduledFrame.store(.max, ordering: .releasing)
        scheduledPlaying.store(playing, ordering: .releasing)
        scheduledFrame.store(deviceFrame, ordering: .releasing)
    }

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

    /// Writes up to `frames` frames without waiting; returns how many fit.
    public func writeAvailable(_ samples: UnsafePointer<Float>, frames: Int) -> Int {
        let count = ring.write(samples, frames: frames)
        if count > 0 { dataAvailable.signal() }
        return count
    }

    /// Waits until the render thread makes room (or, with `evenIfWritable`, renders a period)
    /// or `wake()` is called, at most `timeoutNanoseconds`.
    public func waitForSpace(timeoutNanoseconds: Int64, evenIfWritable: Bool = false) {
        spaceAvailable.prepareToWait()
        if !evenIfWritable && ring.writableFrames > 0 { spaceAvailable.signal(); return }
        spaceAvailable.wait(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// Wakes a producer waiting in `waitForSpace` or `write` (a queue edit to handle).
    public func wake() { spaceAvailable.signal() }

    /// Drops what the ring holds from ring frame `frame` on (total frames, the queue's timeline)
    /// so the producer can write other audio there. If the render thread has already read past
    /// `frame`, the ring is cut at its read position instead; returns where it was cut.
    /// A pending item-end stop at or beyond the cut is withdrawn.
    ///
    /// The render thread is fenced below `frame` first, and a render in progress is waited
    /// out (microseconds: `render` never blocks), so it never reads the frames being replaced.
    public func truncate(from frame: Int) -> Int {
        fenced(at: frame) { cut in
            ring.truncateWrites(to: cut)
            if stopFrame.load(ordering: .acquiring) >= cut { stopFrame.store(.max, ordering: .releasing) }
            return cut
        }
    }

    /// Whether an item-end stop is pending (posted and not reached yet).
    public var hasPendingStop: Bool { stopFrame.load(ordering: .acquiring) != .max }

    /// Posts the next item-end stop at ring frame `frame`: there the render thread pauses
    /// (`holds` false) or holds (true). False if the render thread has already read past it or
    /// another stop is pending.
    public func postStop(at frame: Int, holds: Bool) -> Bool {
        fenced(at: frame) { readPosition in
            guard readPosition == frame, stopFrame.load(ordering: .acquiring) == .max else { return false }
            stopHolds.store(holds, ordering: .relaxed)
            stopFrame.store(frame, ordering: .releasing)
            return true
        }
    }

    /// Withdraws a pending item-end stop (the action at item end became advance).
    public func withdrawStop() {
        fenced(at: .max) { _ in stopFrame.store(.max, ordering: .releasing) }
    }

    /// Runs `body` with the render thread kept from reading at or beyond `frame`; `body` gets
    /// `max(frame, read position)`.
    private func fenced<T>(at frame: Int, _ body: (Int) -> T) -> T {
        fence.store(frame, ordering: .sequentiallyConsistent)
        while inRender.load(ordering: .sequentiallyConsistent) { sched_yield() }
        let result = body(max(frame, ring.totalFramesRead))
        fence.store(.max, ordering: .sequentiallyConsistent)
        dataAvailable.signal()
        return result
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
        /// Paused at an item's end (`actionAtItemEnd` pause).
        case pausedAtItemEnd = 4
        /// Holding at an item's end with the rate kept (`actionAtItemEnd` none).
        case heldAtItemEnd = 5
    }
    public var deviceFrame: Int64
    public var mediaFrame: Int64
    public var kind: Kind
}
