import TuttiCore

/// What a media file holds: its audio format, duration and tags.
public struct TrackInfo: Sendable, Equatable {
    public var input: String
    /// libavformat's short container name, e.g. "flac", "mov,mp4,m4a,3gp,3g2,mj2", "ogg".
    public var container: String
    /// Codec name, e.g. "aac", "mp3", "opus".
    public var codec: String
    public var sampleRate: Int
    public var channelCount: Int
    /// Bits per decoded sample when the codec has a native depth (PCM, FLAC, ALAC), else nil.
    public var bitsPerSample: Int?
    /// Whether libavcodec describes the codec as lossy (MP3, AAC, Vorbis, Opus, ...).
    public var isLossy: Bool
    public var bitRate: Int?
    /// Exact when the container states it (FLAC STREAMINFO, MP4 edit list, Xing/LAME header), else estimated.
    public var duration: MediaTime?
    public var durationIsEstimate: Bool
    public var title: String?
    public var artist: String?
    public var album: String?
    /// The album's artist, when tagged apart from the track's (`album_artist`).
    public var albumArtist: String?
    /// Its disc and track number on the album, when tagged.
    public var albumPosition: AlbumPosition?
    public var hasArtwork: Bool
    /// The loudness its tags state (ReplayGain, R128), if any (`TrackProbe` reads them).
    public var loudnessTags = LoudnessTags()

    /// The bits a sample of this source keeps on the house's wire: its own depth between 16
    /// and 24 (a 16-bit source costs what 16-bit FLAC costs); 16 for a lossy codec, whose noise
    /// lies above 16-bit rounding; 24 when the depth is unknown or above.
    ///
    /// Resampled, a 16-bit source's samples fall between the 16-bit steps, and rounding them
    /// again adds noise equal to the source's own quantization (-101 dBFS RMS; 3 dB more in
    /// all, see docs/RESAMPLING.md).
    public var wireBits: Int {
        if let bitsPerSample { return min(24, max(16, bitsPerSample)) }
        return isLossy ? 16 : 24
    }

    /// Title tag, or the file name without extension.
    public var displayTitle: String {
        if let title { return artist.map { "\($0) – \(title)" } ?? title }
        let name = input.split(separator: "/").last.map(String.init) ?? input
        if let dot = name.lastIndex(of: "."), dot != name.startIndex { return String(name[..<dot]) }
        return name
    }
}
