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
/// - cuts inside the item at the horizon for a seek, an advance or the removal of that item;
/// - cuts inside the item at the horizon, and decodes it again from there, when what is decoded
///   is no longer to sound as it does (the crossfade changed, or the caller says the entries'
///   gains did: `soundChanged`). Entries are otherwise compared by tag: a gain found for an item
///   already decoded (its loudness measured as it was read) applies from its next reading.
///
/// With a crossfade, an item's span overlaps the next one's while it fades out. A cut at the
/// start of an item that an earlier item fades into restarts that earlier item where the fade
/// began (its offset there), so its fade plays again into whatever follows now; a cut never
/// falls inside a fade but for a seek, an advance or the removal of the item fading in, which
/// end the fade there as they end an item.
/// A value type; not thread-safe by itself (one producer owns it).
public struct QueueEditPlan: Equatable, Sendable {
    /// One item as decoded onto the timeline.
    public struct TimelineSpan: Equatable, Sendable {
        public var tag: Int
        public var pass: Int
        public var start: Int64
        /// Its last frame + 1, once known.
        public var end: Int64?
        /// The item's own time at `start` (zero, or where a seek or cut started it).
        public var startTime: MediaTime
        public init(tag: Int, pass: Int, start: Int64, end: Int64?, startTime: MediaTime = .zero) {
            self.tag = tag
            self.pass = pass
            self.start = start
            self.end = end
            self.startTime = startTime
        }

        /// The item's own time at timeline frame `frame` (output frames at `rate`).
        func time(atFrame frame: Int64, rate: Int) -> MediaTime {
            startTime + MediaTime(frame: frame - start, sampleRate: rate)
        }
    }

    /// Where decoding starts again: entry `index` of the edited queue, in `pass`, at `offset`
    /// into the item.
    public struct Restart: Equatable, Sendable {
        public var index: Int
        public var pass: Int
        public var offset: MediaTime
        /// The restart carries on the item as it was decoded (a fade played again, a re-decode
        /// from the horizon), so a cut that lands later than planned moves its offset with it;
        /// a seek's or a boundary's offset stays.
        public var continuesItem: Bool
        public init(index: Int, pass: Int, offset: MediaTime, continuesItem: Bool = false) {
            self.index = index
            self.pass = pass
            self.offset = offset
            self.continuesItem = continuesItem
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
    ///   - outputRate: the timeline's frame rate (to find an item's time at a frame).
    ///   - crossfadeFrames: the crossfade the queue is now read with (0: gapless).
    ///   - soundChanged: what is decoded is to sound otherwise (the crossfade or the entries'
    ///     gains changed): it is decoded again from the horizon.
    public init(entries: [GaplessQueueReader.Entry], previousEntries: [GaplessQueueReader.Entry], spans: [TimelineSpan],
                passes: Int?, horizon: Int64, written: Int64, readerExhausted: Bool, advances: Int = 0, seekTime: MediaTime? = nil,
                outputRate: Int, crossfadeFrames: Int64 = 0, soundChanged: Bool = false) {
        func successor(of tag: Int, pass: Int) -> (index: Int, pass: Int)? {
            Self.successor(of: tag, pass: pass, in: entries, previous: previousEntries, passes: passes)
        }
        /// A cut at the start of `spans[index]`: if an earlier item still fades out there, it
        /// restarts where its fade began; else `fallback` does.
        func restart(cuttingAt index: Int, fallback: Restart?) -> Restart? {
            let frame = spans[index].start
            guard index > 0, let fading = spans[..<index].last(where: { $0.start < frame && ($0.end ?? .max) > frame }),
                  let entry = entries.firstIndex(where: { $0.tag == fading.tag }) else { return fallback }
            return Restart(index: entry, pass: fading.pass, offset: fading.time(atFrame: frame, rate: outputRate), continuesItem: true)
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
            // A hard cut, as a skip always is: an item fading out there stops with it.
            var next = successor(of: playing.tag, pass: playing.pass)
            for _ in 1..<max(advances, 1) {
                guard let step = next else { break }
                next = successor(of: entries[step.index].tag, pass: step.pass)
            }
            action = .cut(frame: max(horizon, playing.start), restart: next.map { Restart(index: $0.index, pass: $0.pass, offset: .zero) },
                          insideItem: true)
            return
        }
        if soundChanged {
            // Decoded again from the horizon: the rest of the item with its new gain, and its
            // end faded as now set. Not inside a fade into it, which plays out first.
            var frame = min(max(horizon, playing.start), written)
            if let fading = spans[..<current].last(where: { ($0.end ?? .max) > frame }), let end = fading.end {
                frame = min(end, written)
            }
            let index = entries.firstIndex { $0.tag == playing.tag }!
            if playing.end.map({ $0 > frame }) ?? true {
                action = .cut(frame: frame, restart: Restart(index: index, pass: playing.pass, offset: playing.time(atFrame: frame, rate: outputRate),
                                                             continuesItem: true),
                              insideItem: true)
                return
            }
        }
        // The first decoded item after the playing one that the edited queue no longer follows.
        var expected = successor(of: playing.tag, pass: playing.pass)
        for index in (current + 1)..<spans.count {
            let span = spans[index]
            guard let next = expected, entries[next.index].tag == span.tag, next.pass == span.pass else {
                action = .cut(frame: span.start,
                              restart: restart(cuttingAt: index, fallback: expected.map { Restart(index: $0.index, pass: $0.pass, offset: .zero) }),
                              insideItem: false)
                return
            }
            expected = successor(of: span.tag, pass: span.pass)
        }
        if !readerExhausted {
            action = .continueReading(nextIndex: expected?.index ?? entries.count, pass: expected?.pass ?? (passes.map { $0 - 1 } ?? 0))
        } else if let next = expected {
            // The queue had run out; the new items follow what is decoded, faded into from the
            // last item's end where that is not heard yet.
            let last = spans[spans.count - 1]
            let fadeStart = max(horizon, last.start, (last.end ?? written) - crossfadeFrames)
            if crossfadeFrames > 0, last.end == written, fadeStart < written, let index = entries.firstIndex(where: { $0.tag == last.tag }) {
                action = .cut(frame: fadeStart, restart: Restart(index: index, pass: last.pass, offset: last.time(atFrame: fadeStart, rate: outputRate),
                                                                 continuesItem: true),
                              insideItem: true)
            } else {
                action = .cut(frame: written, restart: Restart(index: next.index, pass: next.pass, offset: .zero), insideItem: false)
            }
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
