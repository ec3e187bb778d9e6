/// Integer helpers that keep intermediate products in 128 bits, so timeline arithmetic is exact.
public enum WideMath {
    /// `a * b / c` with a 128-bit intermediate, rounded as asked. `c` must be positive.
    @inlinable
    public static func multiplyDivide(_ a: Int64, _ b: Int64, _ c: Int64,
                                      rounding: FloatingPointRoundingRule = .down) -> Int64 {
        precondition(c > 0, "divisor must be positive")
        let product = Int128(a) * Int128(b)
        let divisor = Int128(c)
        var quotient = product / divisor
        let remainder = product - quotient * divisor
        if remainder != 0 {
            switch rounding {
            case .down: if product < 0 { quotient -= 1 }
            case .up: if product > 0 { quotient += 1 }
            case .towardZero: break
            case .awayFromZero: quotient += product < 0 ? -1 : 1
            case .toNearestOrAwayFromZero, .toNearestOrEven:
                let twice = 2 * (remainder < 0 ? -remainder : remainder)
                if twice > divisor || (twice == divisor && (rounding == .toNearestOrAwayFromZero || quotient & 1 != 0)) {
                    quotient += product < 0 ? -1 : 1
                }
            @unknown default: break
            }
        }
        return Int64(quotient)
    }

    @inlinable
    public static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (x, y) = (abs(a), abs(b))
        while y != 0 { (x, y) = (y, x % y) }
        return x
    }
}
