import Synchronization
import TuttiEngine

/// `QueuePlayer`'s timeline output: the ring a local device renders from. The edit horizon is
/// the device's read position plus `editLeadFrames` (the next item's first frames must be
/// decoded in time), or the read position itself while nothing is read (paused, offline).
/// It also carries out the action at item end: before the timeline passes an item's end it
/// posts a stop there (pause or hold) for the render thread.
///
/// Thread-safety: producer thread only, except `wake()` and `actionAtItemEnd`.
final class DeviceRingOutput: QueueTimelineOutput, @unchecked Sendable {
    let source: RingRenderSource
    let editLeadFrames: Int
    private let action: Mutex<ActionAtItemEnd>
    /// The last item end given a stop (or passed without one); producer thread.
    private var lastStopPosted: Int64 = -1

    init(source: RingRenderSource, editLeadFrames: Int, actionAtItemEnd: ActionAtItemEnd) {
        self.source = source
        self.editLeadFrames = editLeadFrames
        action = Mutex(actionAtItemEnd)
    }

    /// What happens at an item end; any thread (the producer replans when it changes).
    var actionAtItemEnd: ActionAtItemEnd {
        get { action.withLock { $0 } }
        set { action.withLock { $0 = newValue } }
    }

    var writtenFrames: Int64 { Int64(source.ring.totalFramesWritten) }

    var editHorizon: Int64 {
        let readPosition = Int64(source.ring.totalFramesRead)
        return source.isPaused || !source.isPaced ? readPosition : readPosition + Int64(editLeadFrames)
    }

    func write(_ samples: UnsafePointer<Float>, frames: Int) -> Int { source.writeAvailable(samples, frames: frames) }

    func truncate(from frame: Int64) -> Int64 { Int64(source.truncate(from: Int(frame))) }

    func waitForSpace(timeoutNanoseconds: Int64, evenIfWritable: Bool) {
        source.waitForSpace(timeoutNanoseconds: timeoutNanoseconds, evenIfWritable: evenIfWritable)
    }

    func wake() { source.wake() }

    /// An edit may still add to the queue until its end is about to play.
    var awaitsEditsAfterEnd: Bool {
        let readable = source.ring.readableFrames
        return source.isPaced && readable > editLeadFrames && !(source.isPaused && readable == 0)
    }

    func queueRanOut() {}

    func finish() { source.finish() }

    func willApplyEdits() {
        if lastStopPosted >= 0 && actionAtItemEnd == .advance { source.withdrawStop() }
    }

    func didCut(at frame: Int64, requested: Int64, insideItem: Bool) {
        if lastStopPosted >= frame { lastStopPosted = frame - 1 }
        if insideItem || frame != requested {
            // Cut inside an item (an advance, a removal, a seek): that is no item end to stop at.
            lastStopPosted = max(lastStopPosted, frame)
        }
    }

    func prepareToWrite(timeline: [QueueEditPlan.TimelineSpan]) -> Int64? {
        if let boundary = unpostedStop(timeline), !source.hasPendingStop,
           source.postStop(at: Int(boundary), holds: actionAtItemEnd == .none) || Int64(source.ring.totalFramesRead) > boundary {
            lastStopPosted = boundary
        }
        // Frames past an item end whose stop is not posted yet must wait for it.
        return unpostedStop(timeline)
    }

    /// The next item end that needs a stop (`actionAtItemEnd` pause or none on a paced device)
    /// and has none yet.
    private func unpostedStop(_ timeline: [QueueEditPlan.TimelineSpan]) -> Int64? {
        guard source.isPaced, actionAtItemEnd != .advance else { return nil }
        let readPosition = Int64(source.ring.totalFramesRead)
        return timeline.first { span in
            guard let end = span.end else { return false }
            return end > lastStopPosted && end >= readPosition
        }?.end
    }
}
