
/// Where a `QueueProducer` writes the queue's timeline, and what it knows of its listener:
/// a local device's ring (`QueuePlayer`) or a house's stream of encoded chunks for a group of
/// rooms (`TuttiHouse`). The producer decodes, joins, loops and edits the queue the same way
/// for both; an output only takes frames, cuts them, and says which frames may still change.
///
/// Thread-safety: every requirement but `wake()` is called on the producer's thread only.
/// `wake()` may be called from any thread.
public protocol QueueTimelineOutput: AnyObject, Sendable {
    /// Frames taken so far: the end of the timeline.
    var writtenFrames: Int64 { get }
    /// The first frame a queue edit may still change: what comes before is heard, or so close
    /// to being heard that the listener can no longer be told in time.
    var editHorizon: Int64 { get }
    /// Takes up to `frames` interleaved frames; returns how many it took (0: full for now).
    func write(_ samples: UnsafePointer<Float>, frames: Int) -> Int
    /// Drops what was taken from `frame` on; returns the frame where it cut, which is later
    /// than `frame` only if the listener has already consumed frames past it.
    func truncate(from frame: Int64) -> Int64
    /// Waits until the output can take frames again (or, with `evenIfWritable`, until anything
    /// changes), `wake()` is called, or the timeout passes.
    func waitForSpace(timeoutNanoseconds: Int64, evenIfWritable: Bool)
    /// Wakes a producer waiting in `waitForSpace` (a queue edit to apply, a stop).
    func wake()
    /// Once the queue has run out: whether an edit may still add to the timeline after its
    /// current end (so the producer waits for edits instead of ending).
    var awaitsEditsAfterEnd: Bool { get }
    /// The queue has run out at `writtenFrames`; an edit may still continue it.
    func queueRanOut()
    /// The producer has ended; nothing more will be written.
    func finish()

    /// Called before each write with the timeline as decoded (items, oldest first); returns a
    /// frame the timeline must not pass yet (an item-end stop not yet posted), or nil.
    func prepareToWrite(timeline: [QueueEditPlan.TimelineSpan]) -> Int64?
    /// Called before the producer plans a queue edit.
    func willApplyEdits()
    /// The timeline was cut at `frame` (where `requested` was asked); `insideItem`: the cut is
    /// not an item end (an advance, a seek, the removal of the playing item).
    func didCut(at frame: Int64, requested: Int64, insideItem: Bool)
}

extension QueueTimelineOutput {
    public func prepareToWrite(timeline: [QueueEditPlan.TimelineSpan]) -> Int64? { nil }
    public func willApplyEdits() {}
    public func didCut(at frame: Int64, requested: Int64, insideItem: Bool) {}
}
