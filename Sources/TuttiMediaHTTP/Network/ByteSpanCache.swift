/// The bytes of one input held so far, as disjoint sorted spans: a progressive download fills
/// one span front to back; a seek far ahead (or FFmpeg probing the end of a file) starts
/// another, and spans merge when they meet.
///
/// Not thread-safe: its owner serializes access.
struct ByteSpanCache {
    private struct Span {
        var start: Int64
        var bytes: [UInt8]
        var end: Int64 { start + Int64(bytes.count) }
    }

    private var spans: [Span] = []

    var ranges: [Range<Int64>] { spans.map { $0.start..<$0.end } }
    var byteCount: Int64 { spans.reduce(0) { $0 + Int64($1.bytes.count) } }

    /// Stores `bytes` at `offset`; bytes already held keep their value.
    mutating func store(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        guard !bytes.isEmpty else { return }
        if let index = spans.firstIndex(where: { $0.end == offset }) {
            // The common case: a download continuing its span.
            spans[index].bytes.append(contentsOf: bytes)
            mergeForward(from: index)
            return
        }
        var index = spans.firstIndex { $0.start > offset } ?? spans.count
        if index > 0, spans[index - 1].end > offset {
            // Overlaps the span before: keep its bytes, add what extends past it.
            index -= 1
            let covered = Int(spans[index].end - offset)
            if covered < bytes.count { spans[index].bytes.append(contentsOf: bytes[covered...]) }
            mergeForward(from: index)
            return
        }
        spans.insert(Span(start: offset, bytes: Array(bytes)), at: index)
        mergeForward(from: index)
    }

    /// Joins span `index` with the spans it now reaches.
    private mutating func mergeForward(from index: Int) {
        while index + 1 < spans.count, spans[index + 1].start <= spans[index].end {
            let next = spans.remove(at: index + 1)
            if next.end > spans[index].end {
                let overlap = Int(spans[index].end - next.start)
                spans[index].bytes.append(contentsOf: next.bytes[overlap...])
            }
        }
    }

    /// Copies what is held from `offset` on into `buffer`; returns the byte count (0: not held).
    func copy(from offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let span = spans.first(where: { $0.start <= offset && offset < $0.end }) else { return 0 }
        let from = Int(offset - span.start)
        let count = min(buffer.count, span.bytes.count - from)
        span.bytes.withUnsafeBytes { held in
            buffer.baseAddress!.copyMemory(from: held.baseAddress! + from, byteCount: count)
        }
        return count
    }

    /// The end of the contiguous bytes held from `offset` on (`offset` itself if none).
    func contiguousEnd(from offset: Int64) -> Int64 {
        spans.first { $0.start <= offset && offset < $0.end }?.end ?? offset
    }

    /// Forgets bytes before `offset`: a live stream played once keeps only a window.
    mutating func discard(before offset: Int64) {
        spans.removeAll { $0.end <= offset }
        if let first = spans.first, first.start < offset {
            spans[0].bytes.removeFirst(Int(offset - first.start))
            spans[0].start = offset
        }
    }
}
