#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A least-squares fit of sinusoids at known frequencies, plus a constant, to a signal: how a
/// resampler's quality is read from its output (docs/RESAMPLING.md).
///
/// The frequencies are exact (the test tone's, moved by the known conversion ratio), so no
/// window or FFT is needed: the fit is the signal's projection onto `cos` and `sin` at each
/// frequency, solved jointly, and whatever it leaves is the residual. The amplitude of the
/// fundamental gives a converter's gain at that frequency; the residual, relative to it, is
/// THD+N (everything that is not the tone: harmonics, images, aliases, noise, full band); the
/// amplitude at an image's frequency is that image's level.
///
/// Pure arithmetic in Double; not tied to any thread.
public struct ToneFit: Sendable {
    /// Each frequency's amplitude (peak), in the order given.
    public let amplitudes: [Double]
    /// The root mean square of what the fit leaves.
    public let residualRMS: Double

    /// Fits `signal` with a constant and one sinusoid at each of `frequencies`, given in
    /// cycles per sample (0 < f < 0.5, distinct enough to be told apart over the signal's
    /// length: a few cycles' difference at least).
    public init(_ signal: [Double], frequencies: [Double]) {
        precondition(!frequencies.isEmpty, "ToneFit needs at least one frequency")
        precondition(signal.count >= 2 * frequencies.count + 1, "ToneFit needs more samples than unknowns")
        let unknowns = 2 * frequencies.count + 1
        // Normal equations AᵀA x = Aᵀy, the basis evaluated by recurrence-free cos/sin of an
        // exact phase (n·f reduced modulo 1), so long signals keep full precision.
        var normal = [Double](repeating: 0, count: unknowns * unknowns)
        var right = [Double](repeating: 0, count: unknowns)
        var row = [Double](repeating: 0, count: unknowns)
        for (n, y) in signal.enumerated() {
            Self.basis(n, frequencies, into: &row)
            for i in 0..<unknowns {
                right[i] += row[i] * y
                for j in i..<unknowns { normal[i * unknowns + j] += row[i] * row[j] }
            }
        }
        for i in 0..<unknowns { for j in 0..<i { normal[i * unknowns + j] = normal[j * unknowns + i] } }
        let solution = Self.solve(normal, right, size: unknowns)
        var amplitudes: [Double] = []
        for k in frequencies.indices {
            amplitudes.append((solution[1 + 2 * k] * solution[1 + 2 * k] + solution[2 + 2 * k] * solution[2 + 2 * k]).squareRoot())
        }
        var squares = 0.0
        for (n, y) in signal.enumerated() {
            Self.basis(n, frequencies, into: &row)
            var model = 0.0
            for i in 0..<unknowns { model += row[i] * solution[i] }
            squares += (y - model) * (y - model)
        }
        self.amplitudes = amplitudes
        self.residualRMS = (squares / Double(signal.count)).squareRoot()
    }

    /// THD+N of the first frequency: the residual RMS relative to its RMS, in dB. Meaningful
    /// when only the fundamental was fitted (anything else fitted is taken out of the residual).
    public var thdPlusNoiseDecibels: Double {
        Self.decibels(residualRMS / (amplitudes[0] / 2.0.squareRoot()))
    }

    /// The level of frequency `index` relative to the first, in dB.
    public func relativeLevelDecibels(_ index: Int) -> Double {
        Self.decibels(amplitudes[index] / amplitudes[0])
    }

    public static func decibels(_ ratio: Double) -> Double { 20 * log10(max(ratio, 1e-20)) }

    /// The frequency, in cycles per sample within [0, 0.5], that `frequency` reads as after
    /// sampling (folded about multiples of the sample rate).
    public static func folded(_ frequency: Double) -> Double {
        let wrapped = frequency - frequency.rounded(.down)
        return wrapped > 0.5 ? 1 - wrapped : wrapped
    }

    private static func basis(_ n: Int, _ frequencies: [Double], into row: inout [Double]) {
        row[0] = 1
        for (k, f) in frequencies.enumerated() {
            let cycles = Double(n) * f
            let phase = 2 * Double.pi * (cycles - cycles.rounded(.down))
            row[1 + 2 * k] = cos(phase)
            row[2 + 2 * k] = sin(phase)
        }
    }

    /// Gaussian elimination with partial pivoting (the systems are tiny and well conditioned).
    private static func solve(_ matrix: [Double], _ vector: [Double], size: Int) -> [Double] {
        var a = matrix
        var b = vector
        for column in 0..<size {
            var pivot = column
            for r in (column + 1)..<size where abs(a[r * size + column]) > abs(a[pivot * size + column]) { pivot = r }
            if pivot != column {
                for c in 0..<size { a.swapAt(column * size + c, pivot * size + c) }
                b.swapAt(column, pivot)
            }
            let diagonal = a[column * size + column]
            precondition(diagonal != 0, "ToneFit: frequencies too close to tell apart over this signal")
            for r in (column + 1)..<size {
                let factor = a[r * size + column] / diagonal
                if factor == 0 { continue }
                for c in column..<size { a[r * size + c] -= factor * a[column * size + c] }
                b[r] -= factor * b[column]
            }
        }
        var x = [Double](repeating: 0, count: size)
        for r in stride(from: size - 1, through: 0, by: -1) {
            var sum = b[r]
            for c in (r + 1)..<size { sum -= a[r * size + c] * x[c] }
            x[r] = sum / a[r * size + r]
        }
        return x
    }
}
