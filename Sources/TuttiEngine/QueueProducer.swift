import Foundation
import Synchronization
import TuttiCore
import TuttiMedia

/// The playback engine: decodes an editable queue onto one timeline of output frames and
/// writes it into a `QueueTimelineOutput`, on a thread of its own, as far ahead as the output
/// takes it. `QueuePlayer` runs it into a device's ring; the house server runs it into the
/// stream its rooms play. Both therefore join items gaplessly, loop, skip broken items and
/// edit a playing queue by the same rule (`QueueEditPlan`): an edit cuts the decoded timeline
/// at the first frame it changes, never before the output's `editHorizon`, and decoding goes
/// on from there; an edit beyond what is decoded costs nothing.
///
/// Every item put on the timeline (or failing) is recorded as an `ItemOutcome` with its
/// frames, so an owner can tell which item is heard at any frame.
///
/// Thread-safety: the control methods (`edit`, `advanceToNextItem`, `seek`, `setPasses`,
/// `setCrossfade`, `replan`, `stop`)
/// and the read-only properties may be used from any thread. `onItem`, `onRead` and
/// `onNetworkEvent` are called on the producer thread; set them before `start()`.
public final class QueueProducer: @unchecked Sendable {
    public typealias Entry = GaplessQueueReader.Entry
    /// Told how the producer applied an edit: the plan's action, or nil when production had
    /// already ended (the queue is edited, the timeline no longer).
    public typealias EditCompletion = @Sendable (QueueEditPlan.Action?) -> Void

    public struct Configuration: Sendable {
        public var outputFormat: AudioFormat
        public var resamplerQuality: Resampler.Quality = .high
        /// How many times the queue plays, joined seamlessly (nil: until stopped); `setPasses`
        /// changes it while playing.
        public var passes: Int? = 1
        /// The entry decoding starts with (nil: the first), and where in it.
        public var startTag: Int?
        public var startTime: MediaTime = .zero
        /// Opens the items that are URLs; nil refuses them, each with a one-line error.
        public var network: (any NetworkInputOpener)?
        /// How long consecutive items crossfade (zero: gapless); `setCrossfade` changes it
        /// while playing.
        public var crossfade: MediaTime = .zero
        public init(outputFormat: AudioFormat) {
            self.outputFormat = outputFormat
        }
    }

    public let configuration: Configuration
    public let output: any QueueTimelineOutput
    /// Cancels the network reads of the item being decoded (on `stop()`).
    public let cancellation: InputCancellation
    /// Every record of an item as it starts, fails and ends (producer thread; keep it quick).
    public var onItem: (@Sendable (ItemOutcome) -> Void)?
    /// After each block decoded, with the decoder of the item being read (producer thread).
    public var onRead: ((AudioFileDecoder?) -> Void)?
    /// Retries and stream titles of network items, by entry tag (producer thread).
    public var onNetworkEvent: (@Sendable (Int, NetworkInputEvent) -> Void)?

    /// The queue as edited, and the edits the producer has not applied yet.
    private struct Requests {
        var entries: [Entry]
        var passes: Int?
        var crossfade: MediaTime
        var advances = 0
        var seekTime: MediaTime?
        /// The entries' gains changed: what is decoded from the horizon is decoded again.
        var soundChanged = false
        var generation = 0
        var completions: [EditCompletion] = []
        /// Production has ended: edits no longer reach the timeline.
        var ended = false
    }
    private let requests: Mutex<Requests>
    private let outcomeList = Mutex<[ItemOutcome]>([])
    private let stopRequested = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    // Producer-thread state.
    private var reader: GaplessQueueReader?
    /// What the reader has put on the timeline: items with their frames.
    private var spans: [QueueEditPlan.TimelineSpan] = []
    /// The entries the reader was given, to find where a removed item stood.
    private var plannedEntries: [Entry] = []

    public init(entries: [Entry], configuration: Configuration, output: any QueueTimelineOutput,
                cancellation: InputCancellation = InputCancellation()) {
        self.configuration = configuration
        self.output = output
        self.cancellation = cancellation
        requests = Mutex(Requests(entries: entries, passes: configuration.passes, crossfade: configuration.crossfade))
    }

    // MARK: Control

    /// Starts producing on a new thread.
    /// - Parameters:
    ///   - raisedPriority: raise the thread's CPU share (`FeederPriority`), for a producer a
    ///     sound card waits on. A producer filling minutes ahead (the house) leaves it off, so
    ///     its bulk decoding never delays the event loop that keeps the rooms in sync.
    ///   - raisedAfterCuts: raise it only from a cut until a second past the cut is written: the
    ///     audio after a seek or skip is due within the edit lead, on a busy machine too, while
    ///     bulk decoding stays at normal priority.
    public func start(threadName: String = "tutti-decode", raisedPriority: Bool = false, raisedAfterCuts: Bool = false) {
        let thread = Thread { [self] in
            if raisedPriority { FeederPriority.raiseCurrentThread() }
            urgentAfterCuts = raisedAfterCuts && !raisedPriority
            run()
            finished.store(true, ordering: .releasing)
            done.signal()
        }
        thread.name = threadName
        thread.start()
    }

    /// Stops producing: the thread ends within a block (a network read is cancelled).
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        cancellation.cancel()
        output.wake()
    }

    /// True once the producer thread has ended.
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Waits for the producer thread to end.
    public func waitUntilFinished() {
        done.wait()
        done.signal()
    }

    /// The queue as edited.
    public var entries: [Entry] { requests.withLock { $0.entries } }

    /// Edits the queue; the producer brings the timeline in line at its next step and calls
    /// `completion` with what it did. Returns false if production has already ended.
    ///
    /// Entries are matched to what is decoded by tag: a new gain for an item already decoded
    /// applies where it is read next, unless `soundChanged` says the change is to be heard now
    /// (replay gain settings changed): then what is decoded from the edit horizon on is decoded
    /// again, the item heard going on from the same frame.
    @discardableResult
    public func edit(_ change: (inout [Entry]) -> Void, soundChanged: Bool = false, completion: EditCompletion? = nil) -> Bool {
        request({
            change(&$0.entries)
            if soundChanged { $0.soundChanged = true }
        }, completion)
    }

    /// Ends the item heard at the edit horizon there and goes on with the next one.
    @discardableResult
    public func advanceToNextItem(completion: EditCompletion? = nil) -> Bool {
        request({ $0.advances += 1 }, completion)
    }

    /// Cuts the item heard at the edit horizon there and goes on with it from `time`.
    @discardableResult
    public func seek(to time: MediaTime, completion: EditCompletion? = nil) -> Bool {
        request({ $0.seekTime = time }, completion)
    }

    /// Sets how many times the queue plays (nil: until stopped), as an edit: what is decoded
    /// stays where the count does not change it (a queue set to repeat before its end is
    /// decoded goes on seamlessly into its second pass).
    @discardableResult
    public func setPasses(_ passes: Int?, completion: EditCompletion? = nil) -> Bool {
        request({ $0.passes = passes }, completion)
    }

    /// Sets how long consecutive items crossfade (zero: gapless), as an edit: what is decoded
    /// from the edit horizon on is decoded again with it, seamlessly (the item heard goes on
    /// from the same frame).
    @discardableResult
    public func setCrossfade(_ crossfade: MediaTime, completion: EditCompletion? = nil) -> Bool {
        request({ $0.crossfade = crossfade }, completion)
    }

    /// Plans again with the queue unchanged (something the output decides on has changed).
    public func replan() {
        _ = request({ _ in }, nil)
    }

    private func request(_ change: (inout Requests) -> Void, _ completion: EditCompletion?) -> Bool {
        let accepted = requests.withLock { state -> Bool in
            change(&state)
            guard !state.ended else { return false }
            state.generation += 1
            if let completion { state.completions.append(completion) }
            return true
        }
        if accepted { output.wake() } else { completion?(nil) }
        return accepted
    }

    // MARK: Outcomes

    /// Every item started or failed so far, in timeline order, with its frames.
    public var outcomes: [ItemOutcome] { outcomeList.withLock { $0 } }

    /// The item on the timeline at `frame` (the last one started at or before it).
    public func outcome(atFrame frame: Int64) -> ItemOutcome? {
        outcomeList.withLock { list in list.last { $0.info != nil && $0.startFrame <= frame } }
    }

    // MARK: Producer

    /// Producer-thread state: whether cuts raise the priority, and the frame up to which it is raised.
    private var urgentAfterCuts = false
    private var urgentUntil: Int64?
    private var began = false
    private var seenGeneration = 0
    private var block: [Float] = []
    private var blockOffset = 0
    private var exhausted = false
    /// The pass count in force (`setPasses`).
    private var passes: Int?
    /// The crossfade in force (`setCrossfade`).
    private var crossfade: MediaTime = .zero

    /// What one step of production did.
    private enum Step {
        /// Wrote or changed something; step again.
        case progressed
        /// The output has no room (or the queue ran out and edits may still come): wait on the
        /// output, then step again.
        case waiting(timeoutNanoseconds: Int64, evenIfWritable: Bool)
        /// Production has ended.
        case ended
    }

    private func run() {
        begin()
        defer { end() }
        while !stopRequested.load(ordering: .acquiring) {
            switch step() {
            case .progressed: continue
            case .waiting(let timeout, let evenIfWritable): output.waitForSpace(timeoutNanoseconds: timeout, evenIfWritable: evenIfWritable)
            case .ended: return
            }
        }
    }

    /// Stepped production, on the caller's thread instead of a thread of its own (a simulated
    /// house steps it on its event loop, so that production is a function of the queue and the
    /// playhead, not of thread timing): produces until the output has no room or production
    /// ends, without ever blocking on the output. Returns false once production has ended.
    /// Never call it on a producer that was started with `start()`.
    public func produceAvailable() -> Bool {
        if !began { begin() }
        if finished.load(ordering: .acquiring) { return false }
        while !stopRequested.load(ordering: .acquiring) {
            switch step() {
            case .progressed: continue
            case .waiting: return true
            case .ended:
                finishStepping()
                return false
            }
        }
        finishStepping()
        return false
    }

    private func finishStepping() {
        end()
        finished.store(true, ordering: .releasing)
        done.signal()
    }

    private func begin() {
        began = true
        let (initial, initialGeneration, early) = requests.withLock { state in
            defer { state.completions.removeAll() }
            return (state.entries, state.generation, state.completions)
        }
        // Edits made before production began are part of the queue it starts with.
        for completion in early { completion(.unchanged) }
        plannedEntries = initial
        (passes, crossfade) = requests.withLock { ($0.passes, $0.crossfade) }
        let first = configuration.startTag.flatMap { tag in initial.firstIndex { $0.tag == tag } } ?? 0
        reader = initial.isEmpty ? nil : makeReader(initial, firstItem: first, offset: configuration.startTime,
                                                    firstFrame: output.writtenFrames, firstPass: 0)
        seenGeneration = initialGeneration
        exhausted = reader == nil
        if exhausted { output.queueRanOut() }
    }

    private func end() {
        let leftover = requests.withLock { state -> [EditCompletion] in
            state.ended = true
            defer { state.completions.removeAll() }
            return state.completions
        }
        for completion in leftover { completion(nil) }
        output.finish()
    }

    private func step() -> Step {
        let channels = configuration.outputFormat.channelCount
        if let until = urgentUntil, output.writtenFrames >= until {
            FeederPriority.restoreCurrentThread()
            urgentUntil = nil
        }
        if let edits = takeEdits(newerThan: &seenGeneration) {
            let action = apply(edits, exhausted: exhausted)
            if case .cut(let frame, _, _) = action, urgentAfterCuts {
                if urgentUntil == nil { FeederPriority.raiseCurrentThread() }
                urgentUntil = frame + Int64(configuration.outputFormat.sampleRate)
            }
            if case .cut = action {
                block.removeAll(keepingCapacity: true)
                blockOffset = 0
                exhausted = reader == nil
                if exhausted { output.queueRanOut() }
            }
            for completion in edits.completions { completion(action) }
        }
        if blockOffset * channels == block.count {
            if exhausted {
                _ = output.prepareToWrite(timeline: spans)
                if output.awaitsEditsAfterEnd { return .waiting(timeoutNanoseconds: 20_000_000, evenIfWritable: true) }
                return endUnlessEdited(since: seenGeneration) ? .ended : .progressed
            }
            blockOffset = 0
            if reader!.read(into: &block) == 0 {
                exhausted = true
                output.queueRanOut()
                return .progressed
            }
            onRead?(reader!.currentDecoder)
        }
        let limit = output.prepareToWrite(timeline: spans)
        var frames = block.count / channels - blockOffset
        if let limit { frames = min(frames, max(0, Int(limit - output.writtenFrames))) }
        let written = frames == 0 ? 0 : block.withUnsafeBufferPointer {
            output.write($0.baseAddress! + blockOffset * channels, frames: frames)
        }
        blockOffset += written
        return written == 0 ? .waiting(timeoutNanoseconds: 100_000_000, evenIfWritable: frames == 0) : .progressed
    }

    private struct Edits {
        var entries: [Entry]
        var passes: Int?
        var crossfade: MediaTime
        var soundChanged: Bool
        var advances: Int
        var seekTime: MediaTime?
        var completions: [EditCompletion]
    }

    private func takeEdits(newerThan seen: inout Int) -> Edits? {
        let (edits, generation) = requests.withLock { state -> (Edits?, Int) in
            guard state.generation != seen else { return (nil, seen) }
            defer {
                state.advances = 0
                state.seekTime = nil
                state.soundChanged = false
                state.completions.removeAll()
            }
            return (Edits(entries: state.entries, passes: state.passes, crossfade: state.crossfade, soundChanged: state.soundChanged,
                          advances: state.advances,
                          seekTime: state.seekTime, completions: state.completions),
                    state.generation)
        }
        seen = generation
        return edits
    }

    /// Ends production unless an edit came in since `generation` (then the loop applies it).
    private func endUnlessEdited(since generation: Int) -> Bool {
        requests.withLock { state in
            guard state.generation == generation else { return false }
            state.ended = true
            return true
        }
    }

    private func makeReader(_ entries: [Entry], firstItem: Int, offset: MediaTime, firstFrame: Int64, firstPass: Int) -> GaplessQueueReader {
        let reader = GaplessQueueReader(entries: entries, outputRate: configuration.outputFormat.sampleRate,
                                        channelCount: configuration.outputFormat.channelCount, quality: configuration.resamplerQuality,
                                        firstItem: firstItem, offset: offset, firstFrame: firstFrame,
                                        // A queue no longer repeating plays out the pass it is in.
                                        passes: passes.map { max($0, firstPass + 1) },
                                        firstPass: firstPass, crossfade: crossfade, cancellation: cancellation)
        reader.onItem = { [self] in record($0) }
        reader.onNetworkEvent = onNetworkEvent
        reader.network = configuration.network
        return reader
    }

    /// Brings the timeline in line with the edited queue (the rule is `QueueEditPlan`'s).
    private func apply(_ edits: Edits, exhausted: Bool) -> QueueEditPlan.Action {
        output.willApplyEdits()
        let written = output.writtenFrames
        let rate = configuration.outputFormat.sampleRate
        let plan = QueueEditPlan(entries: edits.entries, previousEntries: plannedEntries, spans: spans,
                                 passes: edits.passes, horizon: output.editHorizon, written: written,
                                 readerExhausted: exhausted || reader == nil, advances: edits.advances, seekTime: edits.seekTime,
                                 outputRate: rate, crossfadeFrames: edits.crossfade.frame(atSampleRate: rate, rounding: .toNearestOrAwayFromZero),
                                 soundChanged: edits.soundChanged || edits.crossfade != crossfade)
        plannedEntries = edits.entries
        passes = edits.passes
        crossfade = edits.crossfade
        switch plan.action {
        case .unchanged:
            break
        case .continueReading(let nextIndex, let pass):
            reader?.replaceUpcoming(edits.entries, nextIndex: nextIndex, pass: pass, passes: .some(edits.passes))
        case .cut(let frame, let restart, let insideItem):
            let target = min(frame, written)
            let cutFrame = output.truncate(from: target)
            forgetTimeline(from: cutFrame)
            output.didCut(at: cutFrame, requested: target, insideItem: insideItem)
            reader = restart.map { restart in
                var offset = restart.offset
                if restart.continuesItem {
                    // Where the cut landed, not where it was planned (the output had taken frames
                    // past it, or fewer were written).
                    offset = max(.zero, offset + MediaTime(frame: cutFrame - frame, sampleRate: rate))
                }
                return makeReader(edits.entries, firstItem: restart.index, offset: offset, firstFrame: cutFrame, firstPass: restart.pass)
            }
            return .cut(frame: cutFrame, restart: restart, insideItem: insideItem)
        }
        return plan.action
    }

    /// Drops what was decoded from `frame` on from the records: items that will not play, and
    /// the end of the items cut there (with a crossfade, the one fading in and the one fading out).
    private func forgetTimeline(from frame: Int64) {
        spans.removeAll { $0.start >= frame }
        for index in spans.indices where spans[index].end.map({ $0 > frame }) ?? true { spans[index].end = frame }
        outcomeList.withLock { list in
            list.removeAll { $0.startFrame >= frame }
            for index in list.indices where list[index].info != nil
                && (list[index].startFrame + list[index].frameCount > frame || (list[index].frameCount == 0 && list[index].error == nil)) {
                list[index].frameCount = frame - list[index].startFrame
            }
        }
    }

    private func record(_ outcome: ItemOutcome) {
        outcomeList.withLock { list in
            if let last = list.indices.last, list[last].tag == outcome.tag && list[last].pass == outcome.pass
                && list[last].startFrame == outcome.startFrame {
                list[last] = outcome
            } else {
                list.append(outcome)
            }
        }
        if outcome.info != nil {
            let end = outcome.frameCount > 0 || outcome.error != nil ? outcome.startFrame + outcome.frameCount : nil
            if let last = spans.indices.last, spans[last].tag == outcome.tag, spans[last].start == outcome.startFrame {
                spans[last].end = end
            } else {
                spans.append(QueueEditPlan.TimelineSpan(tag: outcome.tag, pass: outcome.pass, start: outcome.startFrame, end: end,
                                                        startTime: outcome.itemStartTime))
            }
            if spans.count > 4096 { spans.removeFirst(2048) }
        }
        onItem?(outcome)
    }
}
