import Synchronization
import TuttiCore
import TuttiDevices

/// The hand-off between the producer (decode + resample, any thread) and the device's render
/// thread: a preallocated lock-free ring plus an end-of-stream flag.
///
/// Thread-safety: one producer thread calls `write`/`finish`; the device's render thread calls
/// `render`. `render` never allocates, locks or blocks; it wakes a waiting producer through a
/// `WakeSignal`.
public final class RingRenderSource: RenderSource, @unchecked Sendable {
    public let ring: AudioRing
    private let ended = Atomic<Bool>(false)
    private let spaceAvailable = WakeSignal()
    private let dataAvailable = WakeSignal()
    private let stopRequested = Atomic<Bool>(false)

    public init(channelCount: Int, capacityFrames: Int) {
        ring = AudioRing(channelCount: channelCount, capacityFrames: capacityFrames)
    }

    // MARK: Render thread

    public func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        let frames = ring.read(into: buffer, frames: frameCount)
        spaceAvailable.signal()
        if frames < frameCount && ended.load(ordering: .acquiring) {
            // Re-read after seeing the flag: the producer's last frames precede it.
            let more = ring.read(into: buffer + frames * ring.channelCount, frames: frameCount - frames)
            return RenderResult(frames: frames + more, endOfStream: ring.readableFrames == 0)
        }
        return RenderResult(frames: frames, endOfStream: false)
    }

    public func waitForFrames(timeoutNanoseconds: Int64) {
        dataAvailable.prepareToWait()
        if ring.readableFrames > 0 || ended.load(ordering: .acquiring) { dataAvailable.signal(); return }
        dataAvailable.wait(timeoutNanoseconds: timeoutNanoseconds)
    }

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
