import Synchronization
import TuttiCore
import TuttiDevices

/// The speaker's hand-off to its device: a ring the playout engine keeps a few tens of
/// milliseconds ahead, never ending (silence is written when there is nothing to play).
///
/// It records which device frame each ring frame is emitted at (they differ by the silence a
/// device inserted on underruns), because the playout engine plans by device frame.
/// Thread-safety: `render` on the device thread only (real-time safe); the rest from the engine.
public final class PlayoutRenderSource: RenderSource, @unchecked Sendable {
    public let ring: AudioRing
    /// Device frame minus ring frame, as of the latest render call.
    private let shift = Atomic<Int64>(0)
    /// Signalled when a render leaves the ring at or below `wakeBelowFrames`.
    public let consumed = WakeSignal()
    /// The level at which the engine is woken to top the ring up.
    public let wakeBelowFrames: Int

    public init(channelCount: Int, capacityFrames: Int, wakeBelowFrames: Int = .max) {
        ring = AudioRing(channelCount: channelCount, capacityFrames: capacityFrames)
        self.wakeBelowFrames = wakeBelowFrames
    }

    public func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        // Each ring frame is emitted at the device frame it was planned for, or not at all: when
        // the device moved on (silence it inserted, frames it missed while gone), what was
        // planned for the frames it skipped is dropped rather than played late.
        let due = Int64(ring.totalFramesRead) + shift.load(ordering: .relaxed)
        if deviceFrame > due {
            _ = ring.discard(frames: Int(min(deviceFrame - due, Int64(ring.readableFrames))))
        }
        shift.store(deviceFrame - Int64(ring.totalFramesRead), ordering: .releasing)
        let frames = ring.read(into: buffer, frames: frameCount)
        if ring.readableFrames <= wakeBelowFrames { consumed.signal() }
        return RenderResult(frames: frames, endOfStream: false)
    }

    public func waitForFrames(timeoutNanoseconds: Int64) {}

    /// The device frame at which the next frame written to the ring will be emitted.
    public var nextWriteDeviceFrame: Int64 {
        Int64(ring.totalFramesWritten) + shift.load(ordering: .acquiring)
    }
}
