import TuttiCore

/// Where an edited queue departs from what was already decoded onto the timeline, and where
/// decoding resumes: the queue-edit rule of the playback engine, kept free of threads, rings
/// and devices so that every output (a device's ring, a house's stream) edits the same way and
/// the rule is tested on its own.
///
/// The timeline holds `spans` (items as decoded, in order). Nothing before `horizon` may
/// change any more (it is being played, or too close to it). An edit then
/// - keeps everything decoded when the edited queue still continues it, and only changes what
///   the reader opens next (`.continueReading`);
/// - cuts at the first item boundary from which the edited queue differs, never before the
///   horizon, and restarts decoding there (`.cut`);
/// - cuts inside the item at the horizon for a seek, an advance or the removal of that item.
/// A value type; not thread-safe by itself (one producer owns it).
public struct QueueEditPlan: Equatable, Sendable {
    /// One item as decoded onto the timeline.
    public struct TimelineSpan: Equatable, Sendable {
        public var tag: Int
        public var pass: Int
        public var start: Int64
        /// Its last frame + 1, once known.
        public var end: Int64?
        public init(tag: Int, pass: Int, start: Int64, end: Int64?) {
            self.tag = tag
            self.pass = pass
            self.start = start
            self.end = end
        }
    }

    /// Where decoding starts again: entry `index` of the edited queue, in `pass`, at `offset`
    /// into the item.
    public struct Restart: Equatable, Sendable {
        public var index: Int
        public var pass: Int
        public var offset: MediaTime
        public init(index: Int, pass: Int, offset: MediaTime) {
            self.index = index
            self.pass = pass
            self.offset = offset
        }
    }

    public enum Action: Equatable, Sendable {
        /// Nothing decoded changes; the reader's next item becomes `nextIndex` (in `pass`).
        case continueReading(nextIndex: Int, pass: Int)
        /// Nothing decoded changes and nothing more is to be read.
        case unchanged
        /// Drop the timeline from `frame` on; decode from `restart` (nil: the queue ends there).
        /// `insideItem`: the cut is not an item end (an advance, a seek, a removal).
        case cut(frame: Int64, restart: Restart?, insideItem: Bool)
    }

    public var action: Action

    /// - Parameters:
    ///   - entries: the edited queue.
    ///   - previousEntries: the queue as the reader was last given it (to place removed items).
    ///   - spans: what is on the timeline, oldest first.
    ///   - passes: how many passes the queue plays (nil: forever).
    ///   - horizon: the first frame that may still change.
    ///   - written: the timeline's end (frames decoded so far).
    ///   - readerExhausted: the reader has read the whole queue (or there is none).
    ///   - advances: `advanceToNextItem` calls since the last plan.
    ///   - seekTime: a seek within the item at the horizon.
    public init(entries: [GaplessQueueReader.Entry], previousEntries: [GaplessQueueReader.Entry], spans: [TimelineSpan],
                passes: Int?, horizon: Int64, written: Int64, readerExhausted: Bool, advances: Int = 0, seekTime: MediaTime? = nil) {
        func successor(of tag: Int, pass: Int) -> (index: Int, pass: Int)? {
            Self.successor(of: tag, pass: pass, in: entries, previous: previousEntries, passes: passes)
        }
        guard let current = spans.lastIndex(where: { $0.start <= horizon }) ?? spans.indices.first else {
            // Nothing decoded yet: the queue starts with its first entry.
            action = readerExhausted && !entries.isEmpty
                ? .cut(frame: written, restart: Restart(index: 0, pass: 0, offset: .zero), insideItem: false)
                : readerExhausted ? .unchanged : .continueReading(nextIndex: 0, pass: 0)
            return
        }
        let playing = spans[current]
        let playingStays = entries.contains { $0.tag == playing.tag }
        if let seekTime, let index = entries.firstIndex(where: { $0.tag == playing.tag }) {
            action = .cut(frame: max(horizon, playing.start), restart: Restart(index: index, pass: playing.pass, offset: seekTime), insideItem: true)
            return
        }
        if advances > 0 || !playingStays {
            var next = successor(of: playing.tag, pass: playing.pass)
            for _ in 1..<max(advances, 1) {
                guard let step = next else { break }
                next = successor(of: entries[step.index].tag, pass: step.pass)
            }
            action = .cut(frame: max(horizon, playing.start), restart: next.map { Restart(index: $0.index, pass: $0.pass, offset: .zero) },
                          insideItem: true)
            return
        }
        // The first decoded item after the playing one that the edited queue no longer follows.
        var expected = successor(of: playing.tag, pass: playing.pass)
        for span in spans[(current + 1)...] {
            guard let next = expected, entries[next.index].tag == span.tag, next.pass == span.pass else {
                action = .cut(frame: span.start, restart: expected.map { Restart(index: $0.index, pass: $0.pass, offset: .zero) },
                              insideItem: false)
                return
            }
            expected = successor(of: span.tag, pass: span.pass)
        }
        if !readerExhausted {
            action = .continueReading(nextIndex: expected?.index ?? entries.count, pass: expected?.pass ?? (passes.map { $0 - 1 } ?? 0))
        } else if let next = expected {
            // The queue had run out; the new items follow what is decoded.
            action = .cut(frame: written, restart: Restart(index: next.index, pass: next.pass, offset: .zero), insideItem: false)
        } else {
            action = .unchanged
        }
    }

    /// Where the queue goes after `tag` (in `pass`) in `entries`: the next entry, or the first
    /// of another pass; for an entry no longer there, the first entry after it in the previous
    /// queue that still is.
    static func successor(of tag: Int, pass: Int, in entries: [GaplessQueueReader.Entry], previous: [GaplessQueueReader.Entry],
                          passes: Int?) -> (index: Int, pass: Int)? {
        func following(_ index: Int) -> (index: Int, pass: Int)? {
            if index < entries.count { return (index, pass) }
            guard !entries.isEmpty, passes.map({ pass + 1 < $0 }) ?? true else { return nil }
            return (0, pass + 1)
        }
        if let index = entries.firstIndex(where: { $0.tag == tag }) { return following(index + 1) }
        if let old = previous.firstIndex(where: { $0.tag == tag }) {
            for later in previous[(old + 1)...] {
                if let index = entries.firstIndex(where: { $0.tag == later.tag }) { return (index, pass) }
            }
        }
        return following(entries.count)
    }
}
