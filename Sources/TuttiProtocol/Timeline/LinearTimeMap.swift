/// A straight-line map from frame indices to times: `time(frame) = referenceTime +
/// (frame − referenceFrame) × nanosecondsPerFrame`. A device's emission times, a clock mapping
/// and a fixed latency compose into one of these over the short span a playout block covers.
public struct LinearTimeMap: Sendable, Equatable {
    public var referenceFrame: Int64
    public var referenceTime: Int64
    public var nanosecondsPerFrame: Double

    public init(referenceFrame: Int64, referenceTime: Int64, nanosecondsPerFrame: Double) {
        self.referenceFrame = referenceFrame
        self.referenceTime = referenceTime
        self.nanosecondsPerFrame = nanosecondsPerFrame
    }

    public func time(ofFrame frame: Int64) -> Int64 {
        referenceTime + Int64((Double(frame - referenceFrame) * nanosecondsPerFrame).rounded())
    }

    /// The first frame whose time is at or after `time`.
    public func firstFrame(atOrAfter time: Int64) -> Int64 {
        let estimate = referenceFrame + Int64((Double(time - referenceTime) / nanosecondsPerFrame).rounded(.up))
        // Correct the Double rounding at the edge.
        if self.time(ofFrame: estimate - 1) >= time { return estimate - 1 }
        if self.time(ofFrame: estimate) < time { return estimate + 1 }
        return estimate
    }
}
