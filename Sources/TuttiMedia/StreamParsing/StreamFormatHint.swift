/// The container/bitstream format of a byte stream given to `AudioStreamParser`, when the
/// caller knows it (from a file extension or a MIME type); without a hint the parser sniffs.
public enum StreamFormatHint: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// MPEG audio (Layer III, also I and II), optionally preceded by ID3v2 tags.
    case mp3
    /// AAC in ADTS frames.
    case adts
    /// Native FLAC ("fLaC" + metadata blocks + frames).
    case flac
    /// Ogg with an Opus or Vorbis stream.
    case ogg
    /// RIFF WAVE with integer or float PCM.
    case wav

    public var description: String {
        switch self {
        case .mp3: "MP3"
        case .adts: "ADTS"
        case .flac: "FLAC"
        case .ogg: "Ogg"
        case .wav: "WAV"
        }
    }
}
