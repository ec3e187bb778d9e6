import Foundation
import TuttiMedia

/// The chosen HLS segments as one continuous byte stream: the download task appends whole
/// segments (and an fMP4 init section first); the decoder thread reads behind them and blocks
/// until bytes arrive, like `HTTPByteSource`.
///
/// It keeps `behindWindowBytes` behind the reader, because libavformat re-reads a little
/// while probing, and lets the downloader wait (`waitForSpace`) while more than a given
/// duration of media is ahead of the reader.
///
/// Thread-safety: all members may be called from any thread; `read` blocks its caller.
final class HLSSegmentBuffer: @unchecked Sendable {
    let name: String
    let behindWindowBytes: Int64

    private let condition = NSCondition()
    // Guarded by `condition`:
    private var cache = ByteSpanCache()
    private var end: Int64 = 0
    private var discardedBefore: Int64 = 0
    /// Appended media segments not yet far behind the reader, for the media duration ahead.
    private var pieces: [(range: Range<Int64>, seconds: Double)] = []
    private var readerPosition: Int64 = 0
    private var opened = false
    private var finished = false
    private var failure: MediaError?
    private var cancelled = false
    private var arrivalBytesPerSecond: Double?
    private var spaceWaiter: (limit: Double, continuation: CheckedContinuation<Void, Never>)?

    init(name: String, behindWindowBytes: Int64) {
        self.name = name
        self.behindWindowBytes = behindWindowBytes
    }

    // MARK: Writer (download task)

    /// The playlists are loaded: `waitUntilOpened` returns.
    func markOpened() {
        condition.withLock {
            opened = true
            condition.broadcast()
        }
    }

    /// Appends `bytes`; `seconds` is the media they hold (0 for an init section).
    func append(_ bytes: [UInt8], seconds: Double) {
        condition.withLock {
            guard !cancelled, !bytes.isEmpty else { return }
            bytes.withUnsafeBytes { cache.store($0, at: end) }
            pieces.append((end..<(end + Int64(bytes.count)), seconds))
            end += Int64(bytes.count)
            condition.broadcast()
        }
    }

    /// No more bytes will come: reads past the end return 0.
    func finish() {
        condition.withLock {
            finished = true
            condition.broadcast()
        }
    }

    /// The stream failed: reads past the bytes held throw `error`.
    func fail(_ error: MediaError) {
        let waiter = condition.withLock { () -> CheckedContinuation<Void, Never>? in
            if failure == nil { failure = error }
            condition.broadcast()
            return takeWaiter()
        }
        waiter?.resume()
    }

    /// Throughput of the segment downloads, reported as the arrival rate.
    func setArrivalRate(bytesPerSecond: Double) {
        condition.withLock { arrivalBytesPerSecond = bytesPerSecond }
    }

    /// Returns once less than `seconds` of media lies ahead of the reader (or the buffer is cancelled).
    func waitForSpace(seconds limit: Double) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = condition.withLock { () -> Bool in
                if cancelled || failure != nil || secondsAhead() < limit { return true }
                spaceWaiter = (limit, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: Reader

    /// Blocks until the downloader has loaded the playlists; throws its failure.
    func waitUntilOpened() throws(MediaError) {
        condition.lock()
        defer { condition.unlock() }
        while !opened && failure == nil && !cancelled { condition.wait() }
        if cancelled { throw MediaError(.cancelled, input: name, reason: "cancelled") }
        if !opened, let failure { throw failure }
    }

    var length: Int64? { condition.withLock { finished ? end : nil } }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(MediaError) -> Int {
        condition.lock()
        readerPosition = offset
        let behind = offset - behindWindowBytes
        if behind > discardedBefore {
            cache.discard(before: behind)
            discardedBefore = behind
            pieces.removeAll { $0.range.upperBound <= behind }
        }
        // The downloader waits for space until less than its limit lies ahead of the reader.
        var waiter = spaceWaiter.flatMap { secondsAhead() < $0.limit ? takeWaiter() : nil }
        var result: Result<Int, MediaError>
        while true {
            if cancelled { result = .failure(MediaError(.cancelled, input: name, reason: "cancelled")); break }
            if offset < discardedBefore {
                result = .failure(MediaError(.unsupported, input: name, reason: "cannot seek back in an HLS stream"))
                break
            }
            let count = cache.copy(from: offset, into: buffer)
            if count > 0 { result = .success(count); break }
            if offset >= end, let failure { result = .failure(failure); break }
            if offset >= end, finished { result = .success(0); break }
            // About to wait for bytes: the downloader must not be left waiting for space, neither
            // registered nor taken above and not yet resumed, or nothing would wake either of us.
            // (Taken above happens when one read consumed the whole of the limit at once, as a
            // 64 KiB read does with 4 s of a low variant.)
            if waiter == nil, spaceWaiter != nil { waiter = takeWaiter() }
            if let pending = waiter {
                waiter = nil
                condition.unlock()
                pending.resume()
                condition.lock()
                continue
            }
            condition.wait()
        }
        condition.unlock()
        waiter?.resume()
        return try result.get()
    }

    func bufferingState(from offset: Int64) -> ByteBufferingState {
        condition.withLock {
            let contiguous = cache.contiguousEnd(from: offset)
            return ByteBufferingState(bytesAhead: contiguous - offset, isComplete: finished && failure == nil && contiguous >= end,
                                      arrivalBytesPerSecond: arrivalBytesPerSecond, loadedRanges: cache.ranges)
        }
    }

    /// The buffer's state in one line, for a diagnosis of a stream that stopped.
    var diagnosis: String {
        condition.withLock {
            "bytes 0..<\(end) (kept from \(discardedBefore)), reader at \(readerPosition), "
                + "\(String(format: "%.2f", secondsAhead())) s ahead, downloader \(spaceWaiter.map { "waiting for less than \($0.limit) s ahead" } ?? "not waiting for space"), "
                + (cancelled ? "cancelled" : failure.map { "failed: \($0.reason)" } ?? (finished ? "finished" : "open"))
        }
    }

    func cancel() {
        let waiter = condition.withLock { () -> CheckedContinuation<Void, Never>? in
            cancelled = true
            condition.broadcast()
            return takeWaiter()
        }
        waiter?.resume()
    }

    // MARK: With `condition` locked

    /// Media seconds appended beyond the reader, counting the segment it is in pro rata.
    private func secondsAhead() -> Double {
        var total = 0.0
        for piece in pieces.reversed() {
            if piece.range.upperBound <= readerPosition { break }
            let from = max(piece.range.lowerBound, readerPosition)
            total += piece.seconds * Double(piece.range.upperBound - from) / Double(piece.range.count)
        }
        return total
    }

    private func takeWaiter() -> CheckedContinuation<Void, Never>? {
        defer { spaceWaiter = nil }
        return spaceWaiter?.continuation
    }
}
