#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How loud a track or an album is: its integrated loudness (EBU R128 / ITU-R BS.1770, in LUFS)
/// and its peak (linear: 1 is full scale). Measured by `LoudnessMeter` (the true peak, 4×
/// oversampled) or read from the file's tags (`LoudnessTags`: ReplayGain's sample peak).
public struct Loudness: Sendable, Equatable, Codable {
    public var integratedLUFS: Double
    public var peak: Double

    public init(integratedLUFS: Double, peak: Double) {
        self.integratedLUFS = integratedLUFS
        self.peak = peak
    }

    /// ReplayGain 2.0's reference: a track at −18 LUFS needs no gain.
    public static let replayGainReferenceLUFS = -18.0

    /// The gain, in dB, that brings it to ReplayGain's reference.
    public var replayGainDB: Double { Self.replayGainReferenceLUFS - integratedLUFS }

    /// The loudness of tracks played one after another (an album), from each one's and its
    /// length: the mean of their powers, weighted by length. BS.1770's gate works on 400 ms
    /// blocks across the whole album; gating each track alone first differs from it by a few
    /// hundredths of a LU on music without long silences. The peak is the highest.
    public static func combined(_ parts: [(loudness: Loudness, seconds: Double)]) -> Loudness? {
        let weighted = parts.filter { $0.seconds > 0 && $0.loudness.integratedLUFS.isFinite }
        let total = weighted.reduce(0) { $0 + $1.seconds }
        guard total > 0 else { return nil }
        let power = weighted.reduce(0) { $0 + $1.seconds * pow(10, $1.loudness.integratedLUFS / 10) } / total
        return Loudness(integratedLUFS: 10 * log10(power), peak: parts.map(\.loudness.peak).max() ?? 0)
    }
}
