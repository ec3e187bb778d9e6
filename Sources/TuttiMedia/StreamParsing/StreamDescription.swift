/// The codec of a parsed stream.
public enum ParsedCodec: String, Sendable, Hashable, CaseIterable {
    case mp3, aac, flac, opus, vorbis, pcm
}

/// The sample layout of a PCM stream (WAV).
public struct PCMLayout: Sendable, Hashable {
    /// Bits per sample as stored (8, 16, 24, 32, 64).
    public var bitsPerSample: Int
    public var isFloat: Bool
    /// Bytes per frame (all channels).
    public var bytesPerFrame: Int

    public init(bitsPerSample: Int, isFloat: Bool, bytesPerFrame: Int) {
        self.bitsPerSample = bitsPerSample
        self.isFloat = isFloat
        self.bytesPerFrame = bytesPerFrame
    }
}

/// What `AudioStreamParser` learned about a stream before its first packet: enough to open a
/// decoder (libavcodec's codec, sample rate, channels and `decoderConfiguration` as extradata).
public struct StreamDescription: Sendable, Hashable {
    /// The container the bytes were in.
    public var container: StreamFormatHint
    public var codec: ParsedCodec
    /// libavcodec's name for the codec ("mp3", "aac", "flac", "opus", "vorbis", "pcm_s16le", …).
    public var codecName: String
    /// The rate of the decoded audio and of packet timestamps (Opus: always 48000).
    public var sampleRate: Int
    public var channelCount: Int
    /// Bits per sample of lossless streams (FLAC, PCM).
    public var bitsPerSample: Int?
    /// What the decoder needs besides the packets, in libavcodec's extradata layout: FLAC the
    /// 34-byte STREAMINFO, Opus the OpusHead packet, Vorbis the three header packets in Xiph
    /// lacing. Empty for MP3, ADTS (configured in-band) and PCM.
    public var decoderConfiguration: [UInt8]
    /// Ogg: the codec's header packets as they were in the stream (Opus: OpusHead, OpusTags;
    /// Vorbis: identification, comment, setup). Empty for other containers.
    public var headerPackets: [[UInt8]]
    /// Frames per packet when the format fixes it (MPEG audio, PCM packets before the last).
    public var framesPerPacket: Int?
    /// The stream's length in frames when its header states it (FLAC STREAMINFO, a WAV data
    /// chunk of known size, the Xing frame count of MP3 × frames per packet).
    public var totalFrames: Int64?
    /// Frames at the start that are encoder priming, not audio (LAME tag delay, Opus pre-skip).
    public var encoderDelay: Int?
    /// Frames at the end that are encoder padding (LAME tag).
    public var encoderPadding: Int?
    /// PCM streams: the sample layout.
    public var pcm: PCMLayout?

    public init(container: StreamFormatHint, codec: ParsedCodec, codecName: String, sampleRate: Int,
                channelCount: Int, bitsPerSample: Int? = nil, decoderConfiguration: [UInt8] = [],
                headerPackets: [[UInt8]] = [], framesPerPacket: Int? = nil, totalFrames: Int64? = nil,
                encoderDelay: Int? = nil, encoderPadding: Int? = nil, pcm: PCMLayout? = nil) {
        self.container = container
        self.codec = codec
        self.codecName = codecName
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.bitsPerSample = bitsPerSample
        self.decoderConfiguration = decoderConfiguration
        self.headerPackets = headerPackets
        self.framesPerPacket = framesPerPacket
        self.totalFrames = totalFrames
        self.encoderDelay = encoderDelay
        self.encoderPadding = encoderPadding
        self.pcm = pcm
    }
}
