/// The codec of a Tutti network audio stream: how one chunk of interleaved Float32 travels from
/// the server to the speakers (see `ChunkEncoder` and `ChunkDecoder`).
///
/// Every chunk is one self-contained packet: it decodes without any other chunk, so a speaker can
/// start at any chunk, chunks can be dropped or flushed, and decoding can run in any order.
public enum StreamCodec: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// FLAC, one frame per chunk, 24 bits per sample (libavcodec's encoder in the house,
    /// libFLAC's decoder in the room). Samples are quantized to 24 bits, or fewer for a chunk of
    /// a shallower source: rounded to the nearest multiple of 2⁻²³ (ties to even) and clipped to
    /// [-1, 1 - 2⁻²³]; the decoder returns exactly those values. The stream's codec
    /// header is FLAC's 34-byte STREAMINFO block.
    case flac
    /// Raw little-endian IEEE Float32, interleaved: bit-exact (any value, including values
    /// beyond ±1, -0, NaN payloads), 4 bytes per sample, no codec header. Chosen over packed s24
    /// so that the PCM path is exactly the server's pipeline.
    case pcm

    /// The name in the wire protocol (`Hello.codecs`, `StreamStart.codec`).
    public var wireName: String {
        switch self {
        case .flac: "flac"
        case .pcm: "pcm-f32le"
        }
    }

    /// The codec with this wire name, if Tutti knows it.
    public init?(wireName: String) {
        guard let codec = Self.allCases.first(where: { $0.wireName == wireName }) else { return nil }
        self = codec
    }

    public var description: String { wireName }

    /// Chunks hold 1 to this many frames (FLAC's STREAMINFO announces it as the largest block).
    public static let maximumChunkFrames = 16384
    /// Channels per stream: 1 to 8 (FLAC's limit).
    public static let maximumChannelCount = 8
}

/// FLAC's framing details that Tutti needs outside libavcodec.
package enum FLACFormat {
    package static let bitsPerSample = 24
    package static let streamInfoSize = 34
    /// libavcodec's encoder refuses a frame size below this (FLAC_MIN_BLOCKSIZE); smaller chunks
    /// are sent as the "small last frame" of a context opened for 16.
    package static let minimumEncoderFrameSize = 16

    /// The 34-byte STREAMINFO the decoder needs: block sizes 16…`maximumChunkFrames`, frame
    /// sizes and total length unknown (0), no MD5, since a stream is a live sequence of chunks.
    package static func streamInfo(sampleRate: Int, channelCount: Int) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(streamInfoSize)
        func append(_ value: UInt64, bytes count: Int) {
            for i in stride(from: count - 1, through: 0, by: -1) { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
        }
        append(UInt64(minimumEncoderFrameSize), bytes: 2)         // min block size
        append(UInt64(StreamCodec.maximumChunkFrames), bytes: 2)  // max block size
        append(0, bytes: 3)                                       // min frame size: unknown
        append(0, bytes: 3)                                       // max frame size: unknown
        // sample rate (20 bits), channels - 1 (3), bits per sample - 1 (5), total samples (36): unknown
        append(UInt64(sampleRate) << 44 | UInt64(channelCount - 1) << 41 | UInt64(bitsPerSample - 1) << 36, bytes: 8)
        bytes.append(contentsOf: repeatElement(0, count: 16))     // MD5: none
        return bytes
    }

    package struct StreamInfo: Equatable {
        package var maximumBlockSize: Int
        package var sampleRate: Int
        package var channelCount: Int
        package var bitsPerSample: Int
    }

    package static func parseStreamInfo(_ bytes: [UInt8]) -> StreamInfo? {
        guard bytes.count == streamInfoSize else { return nil }
        let maxBlock = Int(bytes[2]) << 8 | Int(bytes[3])
        var packed: UInt64 = 0
        for i in 10..<18 { packed = packed << 8 | UInt64(bytes[i]) }
        return StreamInfo(maximumBlockSize: maxBlock,
                          sampleRate: Int(packed >> 44),
                          channelCount: Int((packed >> 41) & 0x7) + 1,
                          bitsPerSample: Int((packed >> 36) & 0x1F) + 1)
    }

    /// FLAC's frame CRC-16 (polynomial 0x8005, MSB first, initial 0). Over a whole frame,
    /// including its CRC footer, it is 0.
    package static func crc16(_ bytes: UnsafeRawBufferPointer) -> UInt16 {
        crc16Table.withUnsafeBufferPointer { table in
            var crc: UInt16 = 0
            for byte in bytes {
                crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
            }
            return crc
        }
    }

    private static let crc16Table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x8005 : crc << 1 }
        return crc
    }
}
