import Foundation

/// Comparisons of interleaved signals.
public enum SignalCheck {
    /// Largest absolute sample difference over the common length.
    public static func maxDifference(_ a: [Float], _ b: [Float]) -> Float {
        var worst: Float = 0
        for i in 0..<min(a.count, b.count) { worst = max(worst, abs(a[i] - b[i])) }
        return worst
    }

    /// Root-mean-square of `a - b` over frames `range` (interleaved with `channels`).
    public static func rmsDifference(_ a: [Float], _ b: [Float], channels: Int, frames range: Range<Int>) -> Double {
        var sum = 0.0
        var count = 0
        for frame in range { for c in 0..<channels {
            let i = frame * channels + c
            guard i < a.count, i < b.count else { continue }
            let d = Double(a[i] - b[i]); sum += d * d; count += 1
        } }
        return count == 0 ? 0 : (sum / Double(count)).squareRoot()
    }

    public static func rms(_ a: [Float], channels: Int, frames range: Range<Int>) -> Double {
        rmsDifference(a, [Float](repeating: 0, count: a.count), channels: channels, frames: range)
    }

    /// The lag (in frames, within ±`maxLag`) that best aligns `signal` to `reference` around
    /// `frame`, by least squared error over a window: 0 means the two are aligned there.
    public static func bestLag(_ signal: [Float], _ reference: [Float], channels: Int, around frame: Int, window: Int = 2048, maxLag: Int = 64) -> Int {
        var best = 0
        var bestError = Double.infinity
        for lag in -maxLag...maxLag {
            var error = 0.0
            for f in (frame - window / 2)..<(frame + window / 2) {
                let s = f + lag
                guard f >= 0, s >= 0, (s + 1) * channels <= signal.count, (f + 1) * channels <= reference.count else { continue }
                for c in 0..<channels { let d = Double(signal[s * channels + c] - reference[f * channels + c]); error += d * d }
            }
            if error < bestError { bestError = error; best = lag }
        }
        return best
    }
}
