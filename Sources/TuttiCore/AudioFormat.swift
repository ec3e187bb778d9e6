/// How one sample is stored.
public enum SampleFormat: String, Sendable, CaseIterable, Codable {
    case float32 = "f32"
    case int16 = "s16"
    /// 24-bit integer, packed in 3 bytes (WAV) or as the device wants it.
    case int24 = "s24"

    public var bytesPerSample: Int {
        switch self {
        case .float32: 4
        case .int16: 2
        case .int24: 3
        }
    }
}

/// A PCM stream's shape. Tutti's pipeline carries interleaved Float32 between stages;
/// devices convert to their `sampleFormat` at the edge.
public struct AudioFormat: Hashable, Sendable, CustomStringConvertible {
    public var sampleRate: Int
    public var channelCount: Int
    public var sampleFormat: SampleFormat
    public var isInterleaved: Bool

    public init(sampleRate: Int, channelCount: Int, sampleFormat: SampleFormat = .float32, isInterleaved: Bool = true) {
        precondition(sampleRate > 0 && channelCount > 0, "invalid audio format \(sampleRate) Hz × \(channelCount)")
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.sampleFormat = sampleFormat
        self.isInterleaved = isInterleaved
    }

    /// The pipeline's working format at this rate and channel count.
    public static func pipeline(sampleRate: Int, channelCount: Int) -> AudioFormat {
        AudioFormat(sampleRate: sampleRate, channelCount: channelCount)
    }

    public var bytesPerFrame: Int { sampleFormat.bytesPerSample * channelCount }

    public func duration(ofFrames frames: Int64) -> MediaTime { MediaTime(frame: frames, sampleRate: sampleRate) }

    public var description: String {
        "\(sampleRate) Hz, \(channelCount == 1 ? "mono" : channelCount == 2 ? "stereo" : "\(channelCount) ch"), \(sampleFormat.rawValue)\(isInterleaved ? "" : " planar")"
    }
}
