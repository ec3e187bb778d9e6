import Dispatch
import TuttiCore
import TuttiMedia

/// Where an observer's times go: an `AsyncStream`, or a block run on a dispatch queue (for
/// callers that must not depend on the Swift concurrency pool being free, like AVFoundation's
/// `addBoundaryTimeObserver(forTimes:queue:using:)`).
enum SynchronizerTimeSink: Sendable {
    case stream(AsyncStream<MediaTime>.Continuation)
    case callback(DispatchQueue, @Sendable (MediaTime) -> Void)

    func send(_ time: MediaTime) {
        switch self {
        case .stream(let continuation): continuation.yield(time)
        case .callback(let queue, let block): queue.async { block(time) }
        }
    }

    /// Ends a stream; runs its termination handler, so never call it under the observer lock.
    func finish() {
        if case .stream(let continuation) = self { continuation.finish() }
    }
}

/// The periodic and boundary observers of a synchronizer, advanced along its timeline.
///
/// Each observer walks the timeline's changes in order, so a pause, a jump or a restart that
/// happened between two looks is seen as it happened: times crossed while playing up to the
/// change are reported, a jump restarts from the new time (inclusive), a seamless change
/// (a resume where it paused) carries on. Times skipped by a jump are not reported.
///
/// Not thread-safe: the synchronizer guards it with its observer lock.
struct SynchronizerTimeObservers {
    private enum Kind {
        case periodic(interval: MediaTime)
        case boundaries([MediaTime])  // ascending, not yet reported
    }

    private struct Observer {
        var kind: Kind
        let sink: SynchronizerTimeSink
        var lastAnchorID: Int
        var playing: Bool
        /// Times at or after (`inclusive`) or after `low` are still to report.
        var low: MediaTime
        var inclusive: Bool
    }

    private var observers: [Int: Observer] = [:]
    private var nextID = 0

    var isEmpty: Bool { observers.isEmpty }

    /// Registers an observer starting from the timeline's state at device frame `frame`.
    mutating func addPeriodic(interval: MediaTime, sink: SynchronizerTimeSink, timeline: SynchronizerTimeline, frame: Int64) -> Int {
        add(.periodic(interval: interval), sink, timeline, frame)
    }

    mutating func addBoundaries(_ times: [MediaTime], sink: SynchronizerTimeSink, timeline: SynchronizerTimeline, frame: Int64) -> Int {
        add(.boundaries(times.sorted()), sink, timeline, frame)
    }

    private mutating func add(_ kind: Kind, _ sink: SynchronizerTimeSink, _ timeline: SynchronizerTimeline, _ frame: Int64) -> Int {
        nextID += 1
        let anchor = timeline.anchor(at: frame)
        let now = timeline.time(atDeviceFrame: frame)
        // Not yet playing: the time it stands at has not been passed, so it still counts.
        observers[nextID] = Observer(kind: kind, sink: sink, lastAnchorID: anchor.id,
                                     playing: anchor.rate == 1, low: now, inclusive: anchor.rate == 0)
        return nextID
    }

    /// Removes an observer; returns its sink for the caller to finish outside its lock.
    mutating func remove(_ id: Int) -> SynchronizerTimeSink? {
        observers.removeValue(forKey: id)?.sink
    }

    /// Reports what the timeline crossed up to device frame `frame`. Returns the sinks that are
    /// complete (all boundaries passed), to be finished by the caller outside its lock.
    mutating func advance(timeline: SynchronizerTimeline, to frame: Int64) -> [SynchronizerTimeSink] {
        var finished: [SynchronizerTimeSink] = []
        for id in Array(observers.keys).sorted() {
            guard var observer = observers[id] else { continue }
            for anchor in timeline.anchors where anchor.id > observer.lastAnchorID && anchor.deviceFrame <= frame {
                if observer.playing {
                    // Up to the change: where the old stretch had got when the new one began.
                    report(&observer, through: timeline.time(atDeviceFrame: anchor.deviceFrame - 1) + MediaTime(frame: 1, sampleRate: timeline.sampleRate))
                }
                if anchor.isJump {
                    observer.low = anchor.time
                    observer.inclusive = true
                }
                observer.playing = anchor.rate == 1
                observer.lastAnchorID = anchor.id
            }
            if observer.playing { report(&observer, through: timeline.time(atDeviceFrame: frame)) }
            if case .boundaries(let remaining) = observer.kind, remaining.isEmpty {
                finished.append(observer.sink)
                observers.removeValue(forKey: id)
            } else {
                observers[id] = observer
            }
        }
        return finished
    }

    /// Removes every observer; returns their sinks for the caller to finish outside its lock.
    mutating func removeAll() -> [SynchronizerTimeSink] {
        defer { observers.removeAll() }
        return observers.values.map(\.sink)
    }

    private func report(_ observer: inout Observer, through high: MediaTime) {
        guard observer.low < high || (observer.inclusive && observer.low == high) else { return }
        switch observer.kind {
        case .periodic(let interval):
            for time in Self.multiples(of: interval, from: observer.low, inclusive: observer.inclusive, through: high) {
                observer.sink.send(time)
            }
        case .boundaries(var remaining):
            while let first = remaining.first, first < observer.low || (first == observer.low && !observer.inclusive) {
                // Behind the observer's position (skipped by a jump, or passed before it was added).
                remaining.removeFirst()
            }
            while let first = remaining.first, first <= high {
                observer.sink.send(first)
                remaining.removeFirst()
            }
            observer.kind = .boundaries(remaining)
        }
        observer.low = high
        observer.inclusive = false
    }

    /// The multiples k × `interval` in [low, high] (or (low, high]), at most 10 000.
    static func multiples(of interval: MediaTime, from low: MediaTime, inclusive: Bool, through high: MediaTime) -> [MediaTime] {
        // k × iv.value / iv.timescale compared with t.value / t.timescale, in 128 bits.
        func quotient(_ time: MediaTime, roundingUp: Bool) -> Int128 {
            let numerator = Int128(time.value) * Int128(interval.timescale)
            let denominator = Int128(time.timescale) * Int128(interval.value)
            var q = numerator / denominator
            let exact = q * denominator == numerator
            if numerator < 0 && !exact { q -= 1 }  // floor
            if roundingUp && !exact { q += 1 }
            return q
        }
        var first = quotient(low, roundingUp: true)
        if !inclusive && MediaTime(value: Int64(first) * interval.value, timescale: interval.timescale) == low { first += 1 }
        let last = min(quotient(high, roundingUp: false), first + 9_999)
        guard first <= last else { return [] }
        return (first...last).map { MediaTime(value: Int64($0) * interval.value, timescale: interval.timescale) }
    }
}
