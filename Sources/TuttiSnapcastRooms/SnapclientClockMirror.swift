/// snapclient's estimate of this server's clock, mirrored from its time probes, so that the
/// time stamps it is sent make it play when Tutti's rooms do even where its estimate is wrong.
///
/// snapclient (0.26) keeps the offsets of its last 200 probes — 50 at start, then one a second —
/// and takes their plain median as the server's clock, with no rate. Between two clocks that
/// drift apart (crystals tens of ppm apart, with no NTP to discipline them) that median lags the
/// true offset by about half its window: 70 ppm and 100 s of probes is 3.5 ms. The server sees
/// the same probes. Where the clocks drift apart, the median of the window's offsets is the
/// offset at the median of their times, so the client's estimate is off by the drift rate
/// times how long ago that was; the rate is the least-squares slope of the last minute's
/// offsets. A chunk stamped `heard − buffer − error` is played at `heard` by the client's wrong
/// clock. Only the slope is taken from the fit: the probes' delays (a tail of late ones on a
/// busy event loop) pull a mean, but not a median, so comparing the fit's level with the
/// median would read their skew as clock error (70–190 µs of it, measured, between two clocks
/// that did not drift).
///
/// Not thread-safe: the client's connection's event loop.
struct SnapclientClockMirror {
    /// snapclient's window: its last 200 probes, cleared after a minute without one.
    static let windowSize = 200
    static let staleNanoseconds: Int64 = 60_000_000_000
    /// The fit's window, and the span it needs before it corrects anything. (Ten minutes
    /// instead of one made a 90 s run worse: p99 2.5 ms against 0.4–1.1 ms.)
    static let fitNanoseconds: Int64 = 60_000_000_000
    /// Twenty seconds: over five, the slope through a handful of seconds' lowest offsets was
    /// off by tens of ppm between clocks that did not drift, and moving the client's chunks by
    /// that confused it into hard resyncs.
    static let minimumFitSpanNanoseconds: Int64 = 20_000_000_000

    /// The client's window: when each probe arrived, and its offset.
    private var window: [(time: Int64, offset: Int64)] = []
    private var samples: [(time: Int64, offset: Int64)] = []
    /// The fitted drift, refitted at each probe (it changes only then) rather than at each of
    /// the fifty blocks a second that ask for it.
    private(set) var drift: Double = 0

    /// A probe the client sent at `sentByClient` (its clock) that arrived at `receivedAt` (ours).
    mutating func add(sentByClient: Int64, receivedAt: Int64) {
        let offset = receivedAt - sentByClient
        if let last = samples.last, receivedAt - last.time > Self.staleNanoseconds { window.removeAll() }
        window.append((receivedAt, offset))
        if window.count > Self.windowSize { window.removeFirst(window.count - Self.windowSize) }
        samples.append((receivedAt, offset))
        if let first = samples.first, receivedAt - first.time > Self.fitNanoseconds {
            samples.removeAll { receivedAt - $0.time > Self.fitNanoseconds }
        }
        drift = fittedDrift()
    }

    /// The client's median offset, as it computes it (the mean of the middle two of an even count).
    var clientEstimate: Int64? {
        guard !window.isEmpty else { return nil }
        let sorted = window.map(\.offset).sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// How fast the client's clock drifts from ours: d(offset)/d(time), the least-squares slope
    /// of the lowest offset of each second of the last minute (the probes that waited least:
    /// a late one only ever adds delay, and a mean slope through them wandered by ±3 ppm
    /// between two clocks that did not drift); 0 until the probes span twenty seconds. The
    /// client's idea of this server's clock (its clock plus a constant median) runs at
    /// `1 − drift` of ours.
    private func fittedDrift() -> Double {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= Self.minimumFitSpanNanoseconds else { return 0 }
        var lowest: [Int64: (time: Int64, offset: Int64)] = [:]
        for sample in samples {
            let second = (sample.time - first.time) / 1_000_000_000
            if let kept = lowest[second], kept.offset <= sample.offset { continue }
            lowest[second] = sample
        }
        let points = Array(lowest.values)
        guard points.count >= 15 else { return 0 }
        let n = Double(points.count)
        let meanX = points.reduce(0.0) { $0 + Double($1.time - last.time) } / n
        let meanY = points.reduce(0.0) { $0 + Double($1.offset - last.offset) } / n
        var sxx = 0.0, sxy = 0.0
        for point in points {
            let x = Double(point.time - last.time) - meanX, y = Double(point.offset - last.offset) - meanY
            sxx += x * x
            sxy += x * y
        }
        return sxx > 0 ? sxy / sxx : 0
    }

    /// How far the true offset at `time` (our clock) is past the client's estimate: its chunks'
    /// time stamps are moved earlier by this much.
    func estimateError(at time: Int64) -> Int64 {
        guard !window.isEmpty else { return 0 }
        let times = window.map(\.time).sorted()
        let medianTime = times[times.count / 2]
        return Int64((drift * Double(time - medianTime)).rounded())
    }
}
