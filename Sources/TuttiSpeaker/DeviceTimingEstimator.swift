import TuttiProtocol
/// Fits a device's emission times, `time(frame) ≈ a + b × frame`, from its position reports
/// (frames emitted, host time), over a sliding window. A simulated card reports exact points;
/// a real one reports noisy ones, which the least-squares line smooths. Not thread-safe.
public struct DeviceTimingEstimator: Sendable {
    public let nominalNanosecondsPerFrame: Double
    private var points: [(frame: Int64, time: Int64)] = []
    private let capacity: Int
    /// The line fitted when the last point came: the engine asks for it every block, and points
    /// come at most once a device period (fitting 200 points each block was 9 % of its time).
    public private(set) var map: LinearTimeMap?

    public init(sampleRate: Int, capacity: Int = 200) {
        nominalNanosecondsPerFrame = 1e9 / Double(sampleRate)
        self.capacity = capacity
    }

    public mutating func add(frame: Int64, time: Int64) {
        if let last = points.last, frame <= last.frame { return }
        points.append((frame, time))
        if points.count > capacity { points.removeFirst(points.count - capacity) }
        map = fit()
    }

    public var hasEstimate: Bool { !points.isEmpty }

    /// The fitted line as a map from device frames to host time.
    private func fit() -> LinearTimeMap? {
        guard let last = points.last else { return nil }
        guard points.count >= 2, last.frame - points[0].frame >= 4800 else {
            return LinearTimeMap(referenceFrame: last.frame, referenceTime: last.time, nanosecondsPerFrame: nominalNanosecondsPerFrame)
        }
        let n = Double(points.count)
        let meanX = points.reduce(0.0) { $0 + Double($1.frame - last.frame) } / n
        let meanY = points.reduce(0.0) { $0 + Double($1.time - last.time) } / n
        var sxx = 0.0, sxy = 0.0
        for p in points {
            let x = Double(p.frame - last.frame) - meanX, y = Double(p.time - last.time) - meanY
            sxx += x * x
            sxy += x * y
        }
        let slope = sxy / sxx
        // Reference at the latest point, on the fitted line.
        return LinearTimeMap(referenceFrame: last.frame, referenceTime: last.time + Int64((meanY - slope * meanX).rounded()), nanosecondsPerFrame: slope)
    }
}
