/// One compressed (or PCM) packet of a parsed stream: what a decoder takes in one call.
public struct StreamPacket: Sendable, Hashable {
    public var bytes: [UInt8]
    /// Frames the packet decodes to, when the bitstream says so (before any gapless trimming).
    public var frameCount: Int?
    /// The packet's first frame on the stream's timeline, in frames at `StreamDescription.sampleRate`,
    /// counted from the first packet (MPEG audio, ADTS, FLAC, WAV: 0) or taken from Ogg granule
    /// positions (Opus: includes pre-skip; Vorbis: may start slightly below 0, as libavformat
    /// reports it). Nil when the format does not give one.
    public var timestamp: Int64?

    public init(bytes: [UInt8], frameCount: Int?, timestamp: Int64?) {
        self.bytes = bytes
        self.frameCount = frameCount
        self.timestamp = timestamp
    }
}
