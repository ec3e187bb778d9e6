import TuttiCore
import TuttiMedia

/// What happened to one queue item: where it went on the timeline, how much of it, and why not
/// all of it. The one record of an item for the reader, the engine, the player and the house.
public struct ItemOutcome: Sendable {
    public var index: Int
    public var path: String
    public var info: TrackInfo?
    /// The output frame (timeline position of the queue) at which the item starts.
    public var startFrame: Int64
    /// Output frames it contributed.
    public var frameCount: Int64
    /// Set when the item could not be played, or only partly (truncated, corrupt).
    public var error: MediaError?
    /// Which pass over the queue this is, from 0 (the looper repeats the queue).
    public var pass: Int = 0
    /// The caller's tag of the queue entry (`GaplessQueueReader.Entry.tag`); the index for a
    /// reader made from paths.
    public var tag: Int = 0
    /// The item's own time of its first frame: zero, or where a seek started it.
    public var itemStartTime: MediaTime = .zero
    /// Its loudness, measured as it was read (`Entry.measuresLoudness`), on the report of its end
    /// when all of it was read, from its start to its end, without error.
    public var measuredLoudness: Loudness?
}

/// Reads a queue of files as one continuous PCM stream at an output rate and channel count:
/// the decode path shared by the local player and the house server.
///
/// Items follow each other with no added or missing frames; one resampler is kept across
/// consecutive items of the same source rate, so joins are continuous through its filter. An
/// item that cannot be played is reported and skipped. Not thread-safe: one reading thread.
///
/// With a crossfade, the last `crossfadeFrames` of each item are held back until the next item
/// is open: then they are mixed with its first frames on the equal-power curve (`Crossfade`),
/// and the next item's `startFrame` is where the fade begins, so the two items' spans overlap on
/// the timeline. Each faded item has its own resampler; an album's next track (never faded)
/// shares it as without crossfade. A reader started inside an item's last `crossfadeFrames`
/// (an edit that cut at a fade's start) fades the rest of it into the next item over what is
/// left, which is the fade it cut.
public final class GaplessQueueReader {
    /// One queue entry: what to play, where to stop, and the caller's tag for it.
    public struct Entry: Sendable, Equatable {
        public var path: String
        /// The item's forward playback end time: it is cut there (nil: plays to its end).
        public var endTime: MediaTime?
        /// Reported back in `ItemOutcome.tag`, so a caller that edits its queue knows which
        /// entry a report is about.
        public var tag: Int
        /// A linear gain on the item's samples (its ReplayGain): 1 leaves them as decoded, bit
        /// for bit. A new gain for an item already decoded is heard where it is read again, or
        /// at once when the edit says the sound changed (`QueueProducer.edit(soundChanged:)`).
        public var gain: Float
        /// Measure the item's loudness as it is read (before its gain), for a caller that keeps
        /// it (the house, for items outside its library): `ItemOutcome.measuredLoudness`.
        public var measuresLoudness: Bool
        public init(path: String, endTime: MediaTime? = nil, tag: Int, gain: Float = 1, measuresLoudness: Bool = false) {
            self.path = path
            self.endTime = endTime
            self.tag = tag
            self.gain = gain
            self.measuresLoudness = measuresLoudness
        }
    }

    public private(set) var entries: [Entry]
    public var paths: [String] { entries.map(\.path) }
    public let outputRate: Int
    public let channelCount: Int
    public let quality: Resampler.Quality
    /// Frames at the output rate over which consecutive items crossfade (0: gapless joins).
    public let crossfadeFrames: Int
    /// Called on the reading thread when an item starts (with `frameCount` 0), fails, or ends.
    public var onItem: ((ItemOutcome) -> Void)?
    /// Called on a network task with an item's retries and radio titles (item index, event).
    public var onNetworkEvent: (@Sendable (Int, NetworkInputEvent) -> Void)?
    /// Cancels network reads of this reader from another thread (a stopping player).
    public let cancellation: InputCancellation
    /// Opens the items that are URLs; nil refuses them (set before reading).
    public var network: (any NetworkInputOpener)?
    /// The decoder of the item being read, for buffering measures (reading thread only).
    public var currentDecoder: AudioFileDecoder? { decoder }

    private var nextIndex: Int
    private var startOffset: MediaTime
    private var decoder: AudioFileDecoder?
    private var current: ItemOutcome?
    private var itemFrames: Int64 = 0
    /// The current item's end in its own frames (its forward playback end time), if cut.
    private var itemEndFrame: Int64?
    private var resampler: Resampler?
    private var segmentRate: Int
    private var segmentOutputStart: Int64
    private var segmentInput: Int64 = 0
    private var written: Int64
    private var decoded: [Float] = []
    private var finished = false

    /// - Parameters:
    ///   - firstItem, offset: where to start (a seek); earlier items are skipped.
    ///   - firstFrame: the output frame number of the first frame read (the timeline position).
    /// How many times the queue plays (nil: until the reader is abandoned). Passes join
    /// gaplessly, sample-exact at the seams, like AVPlayerLooper's treadmill.
    public private(set) var passes: Int?
    private var pass = 0

    public convenience init(paths: [String], outputRate: Int, channelCount: Int, quality: Resampler.Quality = .high,
                            firstItem: Int = 0, offset: MediaTime = .zero, firstFrame: Int64 = 0, passes: Int? = 1,
                            crossfade: MediaTime = .zero) {
        self.init(entries: paths.enumerated().map { Entry(path: $1, tag: $0) }, outputRate: outputRate, channelCount: channelCount,
                  quality: quality, firstItem: firstItem, offset: offset, firstFrame: firstFrame, passes: passes, crossfade: crossfade)
    }

    /// - Parameter firstPass: the pass number of the first item (a reader that takes over a
    ///   looping queue midway); `passes` counts from it.
    /// - Parameter crossfade: how long consecutive items overlap (zero: gapless joins).
    public init(entries: [Entry], outputRate: Int, channelCount: Int, quality: Resampler.Quality = .high,
                firstItem: Int = 0, offset: MediaTime = .zero, firstFrame: Int64 = 0, passes: Int? = 1, firstPass: Int = 0,
                crossfade: MediaTime = .zero, cancellation: InputCancellation = InputCancellation()) {
        precondition(passes.map { $0 > firstPass } ?? true, "a queue plays at least once")
        precondition(crossfade >= .zero, "a crossfade lasts zero seconds or more")
        crossfadeFrames = Int(crossfade.frame(atSampleRate: outputRate, rounding: .toNearestOrAwayFromZero))
        self.cancellation = cancellation
        self.passes = passes
        self.entries = entries
        pass = firstPass
        self.outputRate = outputRate
        self.channelCount = channelCount
        self.quality = quality
        nextIndex = firstItem
        startOffset = offset
        segmentRate = outputRate
        segmentOutputStart = firstFrame
        written = firstFrame
    }

    /// The output frame the next `read` starts at.
    public var position: Int64 { written }

    /// Replaces the entries still to come: the next item opened is `entries[nextIndex]` (in
    /// pass `pass`), and passes wrap around the new list. The item being read goes on. For a
    /// player whose queue was edited beyond what it has read. `passes` replaces the count
    /// (a queue set to repeat, or no longer).
    public func replaceUpcoming(_ entries: [Entry], nextIndex: Int, pass: Int, passes: Int?? = .none) {
        precondition(nextIndex >= 0 && nextIndex <= entries.count, "the next index must be in the new entries")
        if case .some(let count) = passes { self.passes = count }
        self.entries = entries
        self.nextIndex = nextIndex
        self.pass = pass
    }

    /// Replaces `output` with the next block of interleaved frames; returns the frame count,
    /// 0 once the queue is exhausted.
    public func read(into output: inout [Float]) -> Int {
        output.removeAll(keepingCapacity: true)
        if crossfadeFrames > 0 { return readCrossfading(into: &output) }
        while !finished {
            if !tail.isEmpty {
                // The previous run's resampler tail, ahead of a run at another rate.
                swap(&output, &tail)
                tail.removeAll(keepingCapacity: true)
                break
            }
            if decoder == nil && !openNext() {
                // Queue exhausted: the resampler's tail is the last audio.
                if let active = resampler {
                    active.flush(appendingTo: &output)
                    resampler = nil
                }
                finished = true
                break
            }
            var frames: Int
            do throws(MediaError) {
                frames = try decoder!.read(into: &decoded)
            } catch {
                current?.error = error
                finishItem()
                continue
            }
            if frames == 0 {
                finishItem()
                if !output.isEmpty { break }
                continue
            }
            var reachedEndTime = false
            if let end = itemEndFrame, decoder!.position >= end {
                // The forward playback end time: keep what precedes it, then end the item.
                frames = max(0, frames - Int(decoder!.position - end))
                decoded.removeSubrange((frames * channelCount)...)
                reachedEndTime = true
            }
            itemFrames += Int64(frames)
            segmentInput += Int64(frames)
            measure(frames: frames)
            if reachedEndTime { finishItem() }
            if frames == 0 {
                if !output.isEmpty { break }
                continue
            }
            if itemGain != 1 {
                // Before the resampler, which is linear: the same as after it, on fewer samples.
                let gain = itemGain
                decoded.withUnsafeMutableBufferPointer { samples in
                    for index in 0..<(frames * channelCount) { samples[index] *= gain }
                }
            }
            if let resampler {
                decoded.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: frames, appendingTo: &output) }
                if output.isEmpty { continue }
            } else {
                swap(&output, &decoded)
            }
            break
        }
        written += Int64(output.count / channelCount)
        return output.count / channelCount
    }

    /// The output position of the next input frame, through the resampler's exact ratio.
    private var inputPosition: Int64 {
        segmentOutputStart + WideMath.multiplyDivide(segmentInput, Int64(outputRate), Int64(segmentRate), rounding: .toNearestOrAwayFromZero)
    }

    /// Opens the next playable item; false when none is left.
    private func openNext() -> Bool {
        var failuresThisPass = 0
        while true {
            if nextIndex == entries.count {
                // Another pass, unless done — or unless a whole pass failed (nothing would ever play).
                let playedSomething = failuresThisPass < entries.count
                guard !entries.isEmpty, playedSomething, passes.map({ pass + 1 < $0 }) ?? true else { return false }
                pass += 1
                nextIndex = 0
                failuresThisPass = 0
            }
            let index = nextIndex
            let entry = entries[index]
            nextIndex += 1
            var report = ItemOutcome(index: index, path: entry.path, info: nil, startFrame: inputPosition, frameCount: 0, error: nil,
                                         pass: pass, tag: entry.tag, itemStartTime: startOffset)
            let opened: AudioFileDecoder
            do throws(MediaError) {
                var networkEvents: (@Sendable (NetworkInputEvent) -> Void)? = nil
                if let report = onNetworkEvent {
                    networkEvents = { event in report(index, event) }
                }
                opened = try AudioFileDecoder(path: entry.path, outputChannelCount: channelCount, network: network,
                                              cancellation: cancellation, networkEvents: networkEvents)
                if startOffset > .zero {
                    try opened.seek(toFrame: startOffset.frame(atSampleRate: opened.sampleRate, rounding: .toNearestOrAwayFromZero))
                }
            } catch {
                startOffset = .zero
                report.error = error
                onItem?(report)
                failuresThisPass += 1
                continue
            }
            startOffset = .zero
            report.info = opened.info
            if crossfadeFrames > 0 {
                do throws(MediaError) {
                    try joinCrossfading(opened)
                } catch {
                    report.error = error
                    onItem?(report)
                    failuresThisPass += 1
                    continue
                }
            } else if opened.sampleRate != segmentRate || (resampler == nil && opened.sampleRate != outputRate) {
                // A new run of another source rate: the previous resampler's tail ends the old run.
                do throws(MediaError) {
                    try beginSegment(rate: opened.sampleRate)
                } catch {
                    report.error = error
                    onItem?(report)
                    failuresThisPass += 1
                    continue
                }
            }
            report.startFrame = inputPosition
            decoder = opened
            current = report
            itemFrames = 0
            itemEndFrame = entry.endTime.map { $0.frame(atSampleRate: opened.sampleRate, rounding: .toNearestOrAwayFromZero) }
            itemGain = entry.gain
            // Only an item read from its start can be measured whole.
            meter = entry.measuresLoudness && report.itemStartTime == .zero
                ? RunningLoudnessMeter(channelCount: channelCount, sampleRate: opened.sampleRate) : nil
            onItem?(report)
            return true
        }
    }

    private var tail: [Float] = []
    /// The gain of the item being read.
    private var itemGain: Float = 1
    /// Measures the item being read, when its entry asks.
    private var meter: RunningLoudnessMeter?

    /// Feeds the decoded block to the item's meter, if it has one (before the gain).
    private func measure(frames: Int) {
        guard let meter, frames > 0 else { return }
        decoded.withUnsafeBufferPointer { meter.add($0.baseAddress!, frames: frames) }
    }

    // MARK: Crossfade

    /// The frames read and not yet returned (crossfade only), from `heldStart` on: the current
    /// item's last frames, kept until the next item is open, once its end may be a crossfade away.
    private var held: [Float] = []
    private var heldStart = 0
    /// Frames at the front of `held` that nothing can change any more (before a fade's start).
    private var finalFrames = 0
    /// Frames of the current item itself at the end of `held`, not mixed with a fade into it:
    /// the most a fade out of it may take, so a fade never reaches back before its own start.
    private var ownFrames = 0
    /// The previous item's last frames, fading out under the current item's first.
    private var fadeTail: [Float] = []
    private var fadeLength = 0
    private var fadePosition = 0
    /// The last item that played (for the album rule); nil before the reader's first.
    private var previousInfo: TrackInfo?
    /// What `ownFrames` was before the current item's fade took them (to undo it for an item
    /// that gave no audio).
    private var ownFramesBeforeFade = 0
    /// The current item's block as resampled (crossfade only).
    private var fresh: [Float] = []

    private var heldFrames: Int { (held.count - heldStart) / channelCount }

    /// How many of the last frames read stay held: the crossfade's length once the item's end
    /// may be that near (a second's margin for an estimated length), none while it is farther,
    /// and none for an item of unknown length (a live stream: it is not delayed by the
    /// crossfade, and is never faded out).
    private var holdBack: Int {
        guard let decoder else { return crossfadeFrames }
        guard var end = decoder.expectedFrameCount else { return 0 }
        if let itemEndFrame { end = min(end, itemEndFrame) }
        let remaining = WideMath.multiplyDivide(max(0, end - decoder.position), Int64(outputRate), Int64(decoder.sampleRate))
        return remaining > Int64(crossfadeFrames + outputRate) ? 0 : crossfadeFrames
    }

    private func readCrossfading(into output: inout [Float]) -> Int {
        while true {
            let frames = heldFrames
            let emittable = finished ? frames : max(finalFrames, frames - holdBack)
            if emittable > 0 {
                emitHeld(frames: emittable, into: &output)
                break
            }
            if finished { break }
            stepCrossfading()
        }
        written += Int64(output.count / channelCount)
        return output.count / channelCount
    }

    private func emitHeld(frames: Int, into output: inout [Float]) {
        let end = heldStart + frames * channelCount
        output.append(contentsOf: held[heldStart..<end])
        heldStart = end
        finalFrames = max(0, finalFrames - frames)
        if heldStart == held.count {
            held.removeAll(keepingCapacity: true)
            heldStart = 0
        } else if heldStart > 1 << 16 && heldStart * 2 > held.count {
            held.removeFirst(heldStart)
            heldStart = 0
        }
    }

    /// Reads one block of the current item into `held` (mixed with the fading tail while a fade
    /// lasts), ends the item, or opens the next; sets `finished` when the queue is exhausted.
    private func stepCrossfading() {
        guard let decoder else {
            if !openNext() {
                endRun()
                finished = true
            }
            return
        }
        var frames: Int
        do throws(MediaError) {
            frames = try decoder.read(into: &decoded)
        } catch {
            current?.error = error
            finishItem()
            return
        }
        if frames == 0 {
            finishItem()
            return
        }
        var reachedEndTime = false
        if let end = itemEndFrame, decoder.position >= end {
            frames = max(0, frames - Int(decoder.position - end))
            decoded.removeSubrange((frames * channelCount)...)
            reachedEndTime = true
        }
        itemFrames += Int64(frames)
        segmentInput += Int64(frames)
        measure(frames: frames)
        if frames > 0 {
            if itemGain != 1 {
                let gain = itemGain
                decoded.withUnsafeMutableBufferPointer { samples in
                    for index in 0..<(frames * channelCount) { samples[index] *= gain }
                }
            }
            fresh.removeAll(keepingCapacity: true)
            if let resampler {
                decoded.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: frames, appendingTo: &fresh) }
            } else {
                fresh.append(contentsOf: decoded[0..<(frames * channelCount)])
            }
            holdFresh()
        }
        if reachedEndTime { finishItem() }
    }

    /// Moves `fresh`, the current item's next frames, into `held`: its start mixed with the
    /// fading tail while a fade lasts, the rest counted as the item's own.
    private func holdFresh() {
        let count = fresh.count / channelCount
        var mixed = 0
        if fadePosition < fadeLength {
            mixed = min(count, fadeLength - fadePosition)
            let channels = channelCount, position = fadePosition, length = fadeLength
            fresh.withUnsafeMutableBufferPointer { incoming in
                fadeTail.withUnsafeBufferPointer { outgoing in
                    for frame in 0..<mixed {
                        let gains = Crossfade.gains(atFrame: position + frame, of: length)
                        let tailBase = (position + frame) * channels
                        for channel in 0..<channels {
                            let index = frame * channels + channel
                            incoming[index] = incoming[index] * gains.fadingIn + outgoing[tailBase + channel] * gains.fadingOut
                        }
                    }
                }
            }
            fadePosition += mixed
        }
        ownFrames += count - mixed
        held.append(contentsOf: fresh)
    }

    /// Ends the run of audio before an item that does not share it: the previous item's
    /// resampler tail (its last frames), and the rest of a fade the previous item was too short
    /// to cover (the item before it fading out alone), join `held`.
    private func endRun() {
        if let old = resampler {
            fresh.removeAll(keepingCapacity: true)
            old.flush(appendingTo: &fresh)
            holdFresh()
            resampler = nil
        }
        if fadePosition < fadeLength {
            var rest: [Float] = []
            rest.reserveCapacity((fadeLength - fadePosition) * channelCount)
            for frame in fadePosition..<fadeLength {
                let gain = Crossfade.gains(atFrame: frame, of: fadeLength).fadingOut
                for channel in 0..<channelCount { rest.append(fadeTail[frame * channelCount + channel] * gain) }
            }
            held.append(contentsOf: rest)
            fadePosition = fadeLength
        }
    }

    /// Joins an opened item to what was read (crossfade on): fades into it unless it continues
    /// the previous item's album; a faded item, one at another rate, or one after an unfinished
    /// fade starts a run of its own (its own resampler), placed where its audio begins.
    ///
    /// The fade is at most the crossfade, the previous item's own frames (never reaching back
    /// into a fade into it), and half the new item where its length is known; everything held
    /// before it is final, so a queue of items shorter than the crossfade still moves on.
    private func joinCrossfading(_ opened: AudioFileDecoder) throws(MediaError) {
        let info = opened.info
        let fades = previousInfo.map { !Crossfade.continuesAlbum($0, info) } ?? false
        let sharesRun = !fades && fadePosition == fadeLength && info.sampleRate == segmentRate
            && (resampler != nil || info.sampleRate == outputRate)
        guard !sharesRun else {
            ownFrames = 0
            return
        }
        // Made first: a resampler refused leaves everything as it was.
        let next = info.sampleRate == outputRate ? nil
            : try Resampler(inputRate: info.sampleRate, outputRate: outputRate, channelCount: channelCount, quality: quality)
        endRun()
        ownFramesBeforeFade = ownFrames
        var start = written + Int64(heldFrames)
        if fades {
            var length = min(crossfadeFrames, ownFrames, heldFrames)
            if let expected = opened.expectedFrameCount {
                let remaining = max(0, expected - opened.position)
                length = min(length, Int(WideMath.multiplyDivide(remaining, Int64(outputRate), Int64(opened.sampleRate)) / 2))
            }
            if length > 0 {
                fadeTail.removeAll(keepingCapacity: true)
                fadeTail.append(contentsOf: held[(held.count - length * channelCount)...])
                held.removeLast(length * channelCount)
                fadeLength = length
                fadePosition = 0
                start -= Int64(length)
            }
        }
        finalFrames = heldFrames
        ownFrames = 0
        resampler = next
        segmentRate = info.sampleRate
        segmentOutputStart = start
        segmentInput = 0
    }

    /// An item that ended having given no audio leaves the fade into it undone: the tail goes
    /// back as it was, to fade into the next item instead, and the album rule looks past it.
    private func undoEmptyItem() {
        if fadePosition == 0 && fadeLength > 0 {
            held.append(contentsOf: fadeTail[0..<(fadeLength * channelCount)])
            fadeLength = 0
            ownFrames = ownFramesBeforeFade
        }
        segmentOutputStart = written + Int64(heldFrames)
        segmentInput = 0
    }

    private func beginSegment(rate: Int) throws(MediaError) {
        if let old = resampler {
            tail.removeAll(keepingCapacity: true)
            old.flush(appendingTo: &tail)
        }
        let carried = Int64(tail.count / channelCount)
        resampler = rate == outputRate ? nil : try Resampler(inputRate: rate, outputRate: outputRate, channelCount: channelCount, quality: quality)
        segmentRate = rate
        segmentOutputStart = written + carried
        segmentInput = 0
    }

    private func finishItem() {
        if crossfadeFrames > 0 && decoder != nil && itemFrames == 0 {
            undoEmptyItem()
        } else if let info = current?.info {
            previousInfo = info
        }
        if var report = current, let decoder {
            let cut = itemEndFrame.map { decoder.position >= $0 } ?? false
            if report.error == nil { report.error = Self.problem(with: decoder, framesDecoded: itemFrames, cutShort: cut) }
            if let meter, report.error == nil, !cut { report.measuredLoudness = meter.loudness }
            report.frameCount = inputPosition - report.startFrame
            onItem?(report)
        }
        decoder = nil
        current = nil
        meter = nil
    }

    /// Partial failures found after decoding: the item played, but not all of it.
    static func problem(with decoder: AudioFileDecoder, framesDecoded: Int64, cutShort: Bool = false) -> MediaError? {
        let input = decoder.info.input
        if let readError = decoder.readError {
            return MediaError(.corrupt, input: input, reason: "read error after \(formatSeconds(framesDecoded, decoder.sampleRate)): \(readError)")
        }
        if decoder.corruptPacketCount > 0 {
            return MediaError(.corrupt, input: input, reason: "\(decoder.corruptPacketCount) corrupt packet(s) skipped")
        }
        if !cutShort, !decoder.info.durationIsEstimate, let expected = decoder.expectedFrameCount, decoder.position < expected - Int64(decoder.sampleRate / 5) {
            return MediaError(.truncated, input: input, reason: "truncated: decoded \(formatSeconds(decoder.position, decoder.sampleRate)) of \(formatSeconds(expected, decoder.sampleRate))")
        }
        if framesDecoded == 0 {
            return MediaError(.corrupt, input: input, reason: "no audio could be decoded")
        }
        return nil
    }
}

func formatSeconds(_ frames: Int64, _ rate: Int) -> String {
    let tenths = WideMath.multiplyDivide(frames, 10, Int64(rate))
    return "\(tenths / 10).\(tenths % 10) s"
}
