import Testing
import TuttiCore
import TuttiEngine

/// The queue-edit rule alone: given what is decoded and where the horizon is, where an edited
/// queue cuts the timeline and where decoding resumes. (`QueueEditingTests` plays the same
/// rule through a device and checks the emitted samples.)
@Suite struct QueueEditPlanTests {
    typealias TimelineSpan = QueueEditPlan.TimelineSpan
    typealias Restart = QueueEditPlan.Restart

    static func entries(_ tags: [Int]) -> [GaplessQueueReader.Entry] {
        tags.map { GaplessQueueReader.Entry(path: "item\($0).flac", tag: $0) }
    }

    /// A (0–1000), B (1000–2500) decoded, C being read; the horizon inside A.
    static let decoded = [TimelineSpan(tag: 0, pass: 0, start: 0, end: 1000), TimelineSpan(tag: 1, pass: 0, start: 1000, end: 2500),
                          TimelineSpan(tag: 2, pass: 0, start: 2500, end: nil)]

    func plan(_ tags: [Int], previous: [Int] = [0, 1, 2], spans: [TimelineSpan] = decoded, passes: Int? = 1, horizon: Int64 = 400,
              written: Int64 = 3000, exhausted: Bool = false, advances: Int = 0, seek: MediaTime? = nil) -> QueueEditPlan.Action {
        QueueEditPlan(entries: Self.entries(tags), previousEntries: Self.entries(previous), spans: spans, passes: passes,
                      horizon: horizon, written: written, readerExhausted: exhausted, advances: advances, seekTime: seek,
                      outputRate: 48_000).action
    }

    @Test func anInsertCutsAtTheFirstChangedBoundary() {
        // X (tag 9) between A and B: B's start is the first frame that changes.
        #expect(plan([0, 9, 1, 2]) == .cut(frame: 1000, restart: Restart(index: 1, pass: 0, offset: .zero), insideItem: false))
        // Between B and C: B stays, C's start is cut.
        #expect(plan([0, 1, 9, 2]) == .cut(frame: 2500, restart: Restart(index: 2, pass: 0, offset: .zero), insideItem: false))
    }

    @Test func anAppendBeyondWhatIsDecodedChangesOnlyWhatIsReadNext() {
        #expect(plan([0, 1, 2, 9]) == .continueReading(nextIndex: 3, pass: 0))
        // Once the reader has run out, the new item follows what is decoded.
        #expect(plan([0, 1, 2, 9], exhausted: true) == .cut(frame: 3000, restart: Restart(index: 3, pass: 0, offset: .zero), insideItem: false))
        #expect(plan([0, 1, 2], exhausted: true) == .unchanged)
    }

    @Test func removingOrMovingAnUpcomingItem() {
        #expect(plan([0, 2]) == .cut(frame: 1000, restart: Restart(index: 1, pass: 0, offset: .zero), insideItem: false))
        #expect(plan([0, 2, 1]) == .cut(frame: 1000, restart: Restart(index: 1, pass: 0, offset: .zero), insideItem: false))
        // Removing the last decoded one leaves A and B; the queue then ends after B.
        #expect(plan([0, 1]) == .cut(frame: 2500, restart: nil, insideItem: false))
    }

    @Test func thePlayingItemRemovedAdvancedOrSeekedCutsAtTheHorizon() {
        #expect(plan([1, 2]) == .cut(frame: 400, restart: Restart(index: 0, pass: 0, offset: .zero), insideItem: true))
        #expect(plan([0, 1, 2], advances: 1) == .cut(frame: 400, restart: Restart(index: 1, pass: 0, offset: .zero), insideItem: true))
        #expect(plan([0, 1, 2], advances: 2) == .cut(frame: 400, restart: Restart(index: 2, pass: 0, offset: .zero), insideItem: true))
        #expect(plan([0, 1, 2], advances: 3) == .cut(frame: 400, restart: nil, insideItem: true))
        let seek = MediaTime(seconds: 7)
        #expect(plan([0, 1, 2], seek: seek) == .cut(frame: 400, restart: Restart(index: 0, pass: 0, offset: seek), insideItem: true))
        // The horizon in B: B is the playing item, A is history.
        #expect(plan([0, 1, 2], horizon: 1200, advances: 1) == .cut(frame: 1200, restart: Restart(index: 2, pass: 0, offset: .zero), insideItem: true))
        // X inserted before B while B plays: too late for this pass; C is next, and then the end.
        #expect(plan([0, 9, 1, 2], horizon: 1200) == .continueReading(nextIndex: 4, pass: 0))
    }

    @Test func editsFollowLoopingPasses() {
        // Two passes of A, B: pass 0 decoded, pass 1's A being read.
        let spans = [TimelineSpan(tag: 0, pass: 0, start: 0, end: 1000), TimelineSpan(tag: 1, pass: 0, start: 1000, end: 2500),
                        TimelineSpan(tag: 0, pass: 1, start: 2500, end: nil)]
        #expect(plan([0, 1], previous: [0, 1], spans: spans, passes: 2, horizon: 1200) == .continueReading(nextIndex: 1, pass: 1))
        // X appended: it plays before the second pass starts.
        #expect(plan([0, 1, 9], previous: [0, 1], spans: spans, passes: 2, horizon: 1200)
            == .cut(frame: 2500, restart: Restart(index: 2, pass: 0, offset: .zero), insideItem: false))
        // Skipping B in the last pass ends the queue.
        let last = [TimelineSpan(tag: 0, pass: 1, start: 0, end: 1000), TimelineSpan(tag: 1, pass: 1, start: 1000, end: nil)]
        #expect(plan([0, 1], previous: [0, 1], spans: last, passes: 2, horizon: 1200, advances: 1) == .cut(frame: 1200, restart: nil, insideItem: true))
    }

    @Test func nothingDecodedYet() {
        #expect(plan([0, 1], spans: [], horizon: 0, written: 0) == .continueReading(nextIndex: 0, pass: 0))
        #expect(plan([0, 1], spans: [], horizon: 0, written: 0, exhausted: true)
            == .cut(frame: 0, restart: Restart(index: 0, pass: 0, offset: .zero), insideItem: false))
        #expect(plan([], spans: [], horizon: 0, written: 0, exhausted: true) == .unchanged)
    }
}
