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
    public var bitRate: Int?
    /// Exact when the container states it (FLAC STREAMINFO, MP4 edit list, Xing/LAME header), else estimated.
    public var duration: MediaTime?
    public var durationIsEstimate: Bool
    public var title: String?
    public var artist: String?
    public var album: String?
    public var hasArtwork: Bool

    /// Title tag, or the file name without extension.
    public var displayTitle: String {
        if let title { return artist.map { "\($0) – \(title)" } ?? title }
        let name = input.split(separator: "/").last.map(String.init) ?? input
        if let dot = name.lastIndex(of: "."), dot != name.startIndex { return String(name[..<dot]) }
        return name
    }
}
