#if canImport(Glibc)
import Glibc
#endif

/// A fractional position on a frame grid, `frame + fraction`: a timeline position heard between
/// two samples, or a resampler's read position.
///
/// The integer part and the fraction are kept apart because a day at 48 kHz is 4 × 10⁹
/// frames, where a lone Double resolves only 1e-6 frames, and a sum of steps kept in one
/// would drift further. Here the fraction keeps its 53 bits at any distance from zero.
public struct FramePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The input frame at or before the position (floor).
    public let frame: Int64
    /// How far past `frame`, in [0, 1).
    public let fraction: Double

    public init(frame: Int64, fraction: Double = 0) {
        precondition(fraction >= 0 && fraction < 1, "FramePosition fraction must be in [0, 1), got \(fraction)")
        self.frame = frame
        self.fraction = fraction
    }

    /// This position moved by `frames` (of either sign), renormalised so the fraction stays in [0, 1).
    /// Rounds only in the fraction (to about 1e-16 frames) for offsets below 2^52 frames.
    public func advanced(by frames: Double) -> FramePosition {
        precondition(frames.isFinite, "cannot advance a position by \(frames)")
        let whole = frames.rounded(.down)
        var newFrame = frame + Int64(whole)
        var newFraction = fraction + (frames - whole)
        if newFraction >= 1 {
            newFraction -= 1
            newFrame += 1
        }
        return FramePosition(frame: newFrame, fraction: newFraction)
    }

    /// `lhs − rhs` in frames. The integer parts are subtracted exactly first, so the result is
    /// accurate to about 1e-16 frames plus the Double rounding of the whole difference.
    public static func - (lhs: FramePosition, rhs: FramePosition) -> Double {
        Double(lhs.frame - rhs.frame) + (lhs.fraction - rhs.fraction)
    }

    /// `other − self` in frames.
    public func distance(to other: FramePosition) -> Double { other - self }

    public static func < (lhs: FramePosition, rhs: FramePosition) -> Bool {
        lhs.frame != rhs.frame ? lhs.frame < rhs.frame : lhs.fraction < rhs.fraction
    }

    public var description: String { "\(frame)+\(fraction)" }
}
