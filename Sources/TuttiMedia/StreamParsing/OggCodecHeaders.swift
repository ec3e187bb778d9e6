import CFFmpeg

/// The codec of an Ogg logical stream, identified from its first packet, and what its header
/// packets say; also each audio packet's duration.
final class OggCodecState {
    enum Codec { case opus, vorbis }

    let codec: Codec
    private(set) var headers: [[UInt8]] = []
    private var vorbisParser: OpaquePointer?
    private var channels = 0
    private var sampleRate = 0
    private var preSkip = 0

    /// Identifies the codec from a stream's first packet; nil for codecs this parser does not take.
    static func identify(_ packet: [UInt8]) -> Codec? {
        if packet.starts(with: Array("OpusHead".utf8)) { return .opus }
        if packet.starts(with: [1] + Array("vorbis".utf8)) { return .vorbis }
        return nil
    }

    /// A name for codecs Ogg can carry that are not supported, for the error message.
    static func unsupportedName(_ packet: [UInt8]) -> String? {
        if packet.starts(with: [0x7F] + Array("FLAC".utf8)) { return "FLAC" }
        if packet.starts(with: Array("Speex".utf8)) { return "Speex" }
        if packet.starts(with: [0x80] + Array("theora".utf8)) { return "Theora (video)" }
        return nil
    }

    init(codec: Codec) { self.codec = codec }

    deinit { av_vorbis_parse_free(&vorbisParser) }

    var headerCount: Int { codec == .opus ? 2 : 3 }
    var isComplete: Bool { headers.count == headerCount }

    /// Takes the next header packet; returns the description once the last one arrived.
    func addHeader(_ packet: [UInt8]) throws(MediaError) -> StreamDescription? {
        let index = headers.count
        switch codec {
        case .opus:
            if index == 0 {
                guard packet.count >= 19 else { throw streamError(.corrupt, "OpusHead packet is \(packet.count) bytes, shorter than 19") }
                channels = Int(packet[9])
                preSkip = Int(packet[10]) | Int(packet[11]) << 8
                guard channels > 0 else { throw streamError(.corrupt, "OpusHead says 0 channels") }
            } else if !packet.starts(with: Array("OpusTags".utf8)) {
                throw streamError(.corrupt, "Opus stream's second packet is not OpusTags")
            }
        case .vorbis:
            let expected: UInt8 = [1, 3, 5][index]
            guard packet.count > 7, packet[0] == expected, packet[1..<7].elementsEqual("vorbis".utf8) else {
                throw streamError(.corrupt, "Vorbis header packet \(index + 1) of 3 is missing or malformed")
            }
            if index == 0 {
                guard packet.count >= 30 else { throw streamError(.corrupt, "Vorbis identification header is \(packet.count) bytes, shorter than 30") }
                channels = Int(packet[11])
                sampleRate = Int(packet[12]) | Int(packet[13]) << 8 | Int(packet[14]) << 16 | Int(packet[15]) << 24
                guard channels > 0, sampleRate > 0 else { throw streamError(.corrupt, "Vorbis identification header has no channels or sample rate") }
            }
        }
        headers.append(packet)
        guard isComplete else { return nil }
        switch codec {
        case .opus:
            return StreamDescription(container: .ogg, codec: .opus, codecName: "opus", sampleRate: 48000,
                                     channelCount: channels, decoderConfiguration: headers[0],
                                     headerPackets: headers, encoderDelay: preSkip)
        case .vorbis:
            let extradata = Self.xiphLaced(headers)
            vorbisParser = extradata.withUnsafeBufferPointer { av_vorbis_parse_init($0.baseAddress, Int32($0.count)) }
            guard vorbisParser != nil else { throw streamError(.corrupt, "Vorbis setup header is invalid (libavcodec cannot parse it)") }
            return StreamDescription(container: .ogg, codec: .vorbis, codecName: "vorbis", sampleRate: sampleRate,
                                     channelCount: channels, decoderConfiguration: extradata, headerPackets: headers)
        }
    }

    /// Frames an audio packet decodes to (Vorbis: as libavcodec's parser counts them).
    func duration(of packet: [UInt8]) -> Int? {
        switch codec {
        case .opus: return Self.opusDuration(packet)
        case .vorbis:
            guard let vorbisParser, !packet.isEmpty else { return nil }
            let d = packet.withUnsafeBufferPointer { av_vorbis_parse_frame(vorbisParser, $0.baseAddress, Int32($0.count)) }
            return d >= 0 ? Int(d) : nil
        }
    }

    /// Samples at 48 kHz in an Opus packet, from its TOC byte (RFC 6716, section 3.1).
    static func opusDuration(_ packet: [UInt8]) -> Int? {
        guard let toc = packet.first else { return nil }
        let config = Int(toc >> 3)
        let frameSize: Int
        if config < 12 { frameSize = [480, 960, 1920, 2880][config & 3] }
        else if config < 16 { frameSize = [480, 960][config & 1] }
        else { frameSize = [120, 240, 480, 960][config & 3] }
        let count: Int
        switch toc & 3 {
        case 0: count = 1
        case 1, 2: count = 2
        default:
            guard packet.count >= 2 else { return nil }
            count = Int(packet[1] & 0x3F)
        }
        return frameSize * count
    }

    /// Header packets in Xiph lacing, libavcodec's extradata layout for Vorbis.
    static func xiphLaced(_ packets: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(packets.count - 1)]
        for packet in packets.dropLast() {
            bytes.append(contentsOf: repeatElement(255, count: packet.count / 255))
            bytes.append(UInt8(packet.count % 255))
        }
        for packet in packets { bytes.append(contentsOf: packet) }
        return bytes
    }
}
