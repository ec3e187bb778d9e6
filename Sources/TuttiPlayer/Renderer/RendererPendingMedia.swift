/// A renderer's media that has not been played yet, in output frames on the media timeline:
/// sorted, non-overlapping segments of interleaved samples. Gaps between segments play as
/// silence.
///
/// Media stays here until the device has played past it, even after the feeder copied it into
/// the real-time ring, so that a change of timeline (a pause, a scheduled jump) can re-commit
/// it. Not thread-safe: the renderer guards it with its state lock.
struct RendererPendingMedia {
    struct PendingRun {
        var start: Int64
        var samples: [Float]
    }

    let channelCount: Int
    /// Live segments are `segments[head...]`; dropping from the front only moves `head`, so
    /// playing through thousands of small buffers stays linear.
    private var segments: [PendingRun] = []
    private var head = 0
    /// Merging contiguous buffers keeps the segment count low; the cap lets played media be
    /// freed a second at a time instead of only when a long run ends.
    private let mergeLimitFrames: Int

    init(channelCount: Int, mergeLimitFrames: Int) {
        self.channelCount = channelCount
        self.mergeLimitFrames = mergeLimitFrames
    }

    var isEmpty: Bool { head == segments.count }

    /// First frame held, if any.
    var start: Int64? { isEmpty ? nil : segments[head].start }

    /// The frame after the last one held, if any.
    var end: Int64? {
        guard let last = segments.last, !isEmpty else { return nil }
        return last.start + Int64(last.samples.count / channelCount)
    }

    var frameCount: Int64 {
        var total: Int64 = 0
        for index in head..<segments.count { total += Int64(segments[index].samples.count / channelCount) }
        return total
    }

    private func end(of segment: PendingRun) -> Int64 { segment.start + Int64(segment.samples.count / channelCount) }

    /// Adds frames starting at `start`. Frames that overlap media already held are dropped:
    /// the renderer only lets rounding at run boundaries get here, never a real overlap.
    /// Returns the frames kept.
    @discardableResult
    mutating func insert(start: Int64, samples: [Float]) -> Int {
        var start = start
        var samples = samples
        guard samples.count >= channelCount else { return 0 }
        // Usually it goes at the end; otherwise find the first segment ending after `start`.
        var index = segments.count
        if !isEmpty, let last = segments.last, start < end(of: last) {
            index = firstIndex(endingAfter: start)
        }
        // Clip what overlaps held segments at the front...
        while index < segments.count, segments[index].start <= start {
            let skip = Int(min(end(of: segments[index]) - start, Int64(samples.count / channelCount)))
            samples.removeFirst(skip * channelCount)
            start += Int64(skip)
            if samples.isEmpty { return 0 }
            index += 1
        }
        // ...and at the back, where the next held segment starts.
        if index < segments.count {
            let room = Int(segments[index].start - start)
            let frames = samples.count / channelCount
            if frames > room { samples.removeLast((frames - room) * channelCount) }
        }
        let kept = samples.count / channelCount
        guard kept > 0 else { return 0 }
        if index == segments.count, index > head, end(of: segments[index - 1]) == start,
           segments[index - 1].samples.count / channelCount + kept <= mergeLimitFrames {
            segments[index - 1].samples.append(contentsOf: samples)
        } else {
            segments.insert(PendingRun(start: start, samples: samples), at: index)
        }
        return kept
    }

    /// Drops every frame at or after `frame`, trimming a segment that straddles it sample-exactly.
    mutating func trim(from frame: Int64) {
        while !isEmpty, let last = segments.last {
            if last.start >= frame {
                segments.removeLast()
            } else {
                let keep = Int(min(frame - last.start, Int64(last.samples.count / channelCount)))
                segments[segments.count - 1].samples.removeLast(last.samples.count - keep * channelCount)
                break
            }
        }
        compactIfEmpty()
    }

    /// Drops every frame before `frame` (played, or too late to play).
    mutating func drop(before frame: Int64) {
        while !isEmpty {
            let segment = segments[head]
            let segmentEnd = end(of: segment)
            if segmentEnd <= frame {
                segments[head].samples = []
                head += 1
            } else {
                if segment.start < frame {
                    segments[head].samples.removeFirst(Int(frame - segment.start) * channelCount)
                    segments[head].start = frame
                }
                break
            }
        }
        compactIfEmpty()
        if head > 64 && head * 2 > segments.count {
            segments.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        segments.removeAll()
        head = 0
    }

    /// Calls `body` with each held run of frames within `range`, in order: its first frame and
    /// its samples. `body` returns how many frames it took; taking fewer than offered stops.
    /// Returns the frame after the last one taken, or `range.upperBound` when all were taken.
    func forEachRun(in range: Range<Int64>, _ body: (Int64, UnsafeBufferPointer<Float>) -> Int) -> Int64 {
        var index = firstIndex(endingAfter: range.lowerBound)
        while index < segments.count {
            let segment = segments[index]
            if segment.start >= range.upperBound { break }
            let from = max(segment.start, range.lowerBound)
            let to = min(end(of: segment), range.upperBound)
            let offered = Int(to - from)
            let taken = segment.samples.withUnsafeBufferPointer { all in
                body(from, UnsafeBufferPointer(rebasing: all[(Int(from - segment.start) * channelCount)...].prefix(offered * channelCount)))
            }
            if taken < offered { return from + Int64(taken) }
            index += 1
        }
        return range.upperBound
    }

    /// The index of the first live segment whose end is after `frame` (binary search).
    private func firstIndex(endingAfter frame: Int64) -> Int {
        var low = head, high = segments.count
        while low < high {
            let mid = (low + high) / 2
            if end(of: segments[mid]) <= frame { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private mutating func compactIfEmpty() {
        if isEmpty { removeAll() }
    }
}
