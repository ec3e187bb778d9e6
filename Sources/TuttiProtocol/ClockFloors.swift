/// The lines under each way's one-way measurements, as `ClockEstimator` last fitted them: the
/// least `t2 − t1` a request sent at a given local time shows (the way out's delay plus the
/// clocks' offset), and the least `t4 − t3` a reply arriving at a given local time shows (the
/// way back's delay minus the offset). Where a request must leave for its datagram to reach
/// the house at the way's floor, and when the house must reply for its reply to come back at
/// its floor (`AimedExchanges`).
public struct ClockFloors: Sendable, Equatable {
    /// The local time the lines' intercepts are at.
    public var reference: Int64
    public var outwardIntercept: Double
    public var outwardSlope: Double
    public var backwardIntercept: Double
    public var backwardSlope: Double

    public init(reference: Int64, outwardIntercept: Double, outwardSlope: Double, backwardIntercept: Double, backwardSlope: Double) {
        self.reference = reference
        self.outwardIntercept = outwardIntercept
        self.outwardSlope = outwardSlope
        self.backwardIntercept = backwardIntercept
        self.backwardSlope = backwardSlope
    }

    /// The least `t2 − t1` of a request sent at `local`.
    public func outward(atLocal local: Int64) -> Double {
        outwardIntercept + outwardSlope * Double(local - reference)
    }

    /// The least `t4 − t3` of a reply arriving at `local`.
    public func backward(atLocal local: Int64) -> Double {
        backwardIntercept + backwardSlope * Double(local - reference)
    }
}
