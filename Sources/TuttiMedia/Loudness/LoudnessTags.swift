import Foundation

/// The loudness a file's tags state, as taggers write it (`loudgain`, `rsgain`, foobar2000,
/// MusicBrainz Picard): ReplayGain's `REPLAYGAIN_TRACK_GAIN` ("-6.20 dB", against −18 LUFS) and
/// `REPLAYGAIN_TRACK_PEAK` (linear), or Opus's `R128_TRACK_GAIN` (a Q7.8 integer of dB against
/// −23 LUFS); the same for the album. A tag that does not parse is no tag: the file is measured.
public struct LoudnessTags: Sendable, Equatable {
    public var track: Loudness?
    public var album: Loudness?

    public init(track: Loudness? = nil, album: Loudness? = nil) {
        self.track = track
        self.album = album
    }

    /// From a tag lookup (case-insensitive, as FFmpeg's metadata is).
    public init(tag: (String) -> String?) {
        track = Self.loudness(gain: tag("REPLAYGAIN_TRACK_GAIN"), peak: tag("REPLAYGAIN_TRACK_PEAK"), r128: tag("R128_TRACK_GAIN"))
        album = Self.loudness(gain: tag("REPLAYGAIN_ALBUM_GAIN"), peak: tag("REPLAYGAIN_ALBUM_PEAK"), r128: tag("R128_ALBUM_GAIN"))
    }

    static func loudness(gain: String?, peak: String?, r128: String?) -> Loudness? {
        // A peak not given is taken as full scale: the gain is then never limited by a guess.
        let peakValue = peak.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 > 0 && $0 < 100 ? $0 : nil } ?? 1
        if let gain, let decibels = Self.decibels(gain) {
            return Loudness(integratedLUFS: Loudness.replayGainReferenceLUFS - decibels, peak: peakValue)
        }
        if let r128, let q78 = Int(r128.trimmingCharacters(in: .whitespaces)), (-32768...32767).contains(q78) {
            return Loudness(integratedLUFS: -23 - Double(q78) / 256, peak: peakValue)
        }
        return nil
    }

    /// "-6.20 dB", "+3.1 dB", "-6.2": a number of dB within ±60.
    static func decibels(_ text: String) -> Double? {
        var number = text.trimmingCharacters(in: .whitespaces)
        if number.lowercased().hasSuffix("db") { number = String(number.dropLast(2)).trimmingCharacters(in: .whitespaces) }
        if number.hasPrefix("+") { number.removeFirst() }
        guard let value = Double(number), value.isFinite, abs(value) <= 60 else { return nil }
        return value
    }
}
