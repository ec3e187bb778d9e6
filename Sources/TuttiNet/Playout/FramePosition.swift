/// A fractional position on a frame grid: `frame + fraction`, fraction in [0, 1).
///
/// Kept as an integer plus a small Double so hours of frames lose no precision, as a lone
/// Double accumulated along a timeline would.
public struct FramePosition: Sendable, Equatable, Comparable, CustomStringConvertible {
    public private(set) var frame: Int64
    public private(set) var fraction: Double

    public init(frame: Int64, fraction: Double = 0) {
        let whole = fraction.rounded(.down)
        self.frame = frame + Int64(whole)
        self.fraction = fraction - whole
    }

    /// `self + frames`, renormalized.
    public func advanced(by frames: Double) -> FramePosition {
        FramePosition(frame: frame, fraction: fraction + frames)
    }

    /// `other − self` in frames.
    public func distance(to other: FramePosition) -> Double {
        Double(other.frame - frame) + (other.fraction - fraction)
    }

    public static func < (lhs: FramePosition, rhs: FramePosition) -> Bool {
        lhs.frame < rhs.frame || (lhs.frame == rhs.frame && lhs.fraction < rhs.fraction)
    }

    public var description: String { "\(frame)+\(fraction)" }
}
