import CFFmpeg

/// MP3 (MPEG audio) and AAC-in-ADTS streams: frame boundaries from libavcodec's parsers, each
/// frame checked against its own header (a cut final frame or trailing junk is dropped). The
/// first MP3 frame is not audio when it carries a Xing/Info/VBRI header: it is not reported as
/// a packet (as libavformat does not), and its LAME tag gives the encoder delay and padding.
final class MPEGStreamParser: StreamFormatParser {
    enum Kind { case mp3, adts }

    private let kind: Kind
    private let frames: LibavFrameParser?
    private var described = false
    private var checkedFirstFrame = false
    private var timestamp: Int64 = 0
    private var encoderDelay: Int?
    private var encoderPadding: Int?
    private var headerFrameCount: Int64?
    private(set) var discardedByteCount = 0

    init(kind: Kind) {
        self.kind = kind
        frames = LibavFrameParser(codec: kind == .mp3 ? AV_CODEC_ID_MP3 : AV_CODEC_ID_AAC)
    }

    private var formatName: String { kind == .mp3 ? "MP3" : "ADTS" }

    func push(_ bytes: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) throws(MediaError) {
        guard let frames else { throw streamError(.unsupported, "libavcodec has no \(formatName) parser") }
        try frames.parse(bytes) { (frame, _) throws(MediaError) in handle(frame, into: &events) }
    }

    func finish(into events: inout [ParsedEvent]) throws(MediaError) {
        guard let frames else { return }
        try frames.flush { (frame, _) throws(MediaError) in handle(frame, into: &events) }
        if !described {
            throw streamError(.truncated, "\(formatName) stream ends before its first complete frame")
        }
    }

    private func handle(_ frame: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) {
        let bytes = [UInt8](frame)
        switch kind {
        case .mp3:
            guard let header = MPEGAudioHeader(bytes, at: 0), bytes.count >= header.frameLength else {
                discardedByteCount += bytes.count
                return
            }
            if !checkedFirstFrame {
                checkedFirstFrame = true
                if header.layer == 3, readInfoFrame(bytes, header) { return }
            }
            if !described {
                described = true
                let name = ["mp1", "mp2", "mp3"][header.layer - 1]
                events.append(.format(StreamDescription(
                    container: .mp3, codec: .mp3, codecName: name, sampleRate: header.sampleRate,
                    channelCount: header.channelCount, framesPerPacket: header.samplesPerFrame,
                    totalFrames: headerFrameCount.map { $0 * Int64(header.samplesPerFrame) },
                    encoderDelay: encoderDelay, encoderPadding: encoderPadding)))
            }
            emit(bytes, frames: header.samplesPerFrame, into: &events)
        case .adts:
            guard let header = ADTSHeader(bytes, at: 0), bytes.count == header.frameLength else {
                discardedByteCount += bytes.count
                return
            }
            if !described {
                described = true
                let channels = header.channelConfiguration == 7 ? 8 : header.channelConfiguration
                events.append(.format(StreamDescription(
                    container: .adts, codec: .aac, codecName: "aac", sampleRate: header.sampleRate,
                    channelCount: channels > 0 ? channels : max(frames?.channelCount ?? 0, 2),
                    framesPerPacket: header.samplesPerFrame)))
            }
            emit(bytes, frames: header.samplesPerFrame, into: &events)
        }
    }

    private func emit(_ bytes: [UInt8], frames count: Int, into events: inout [ParsedEvent]) {
        events.append(.packet(StreamPacket(bytes: bytes, frameCount: count, timestamp: timestamp)))
        timestamp += Int64(count)
    }

    /// Whether the frame is a Xing/Info or VBRI header frame; reads its frame count and LAME tag.
    private func readInfoFrame(_ bytes: [UInt8], _ header: MPEGAudioHeader) -> Bool {
        let tag = 4 + header.sideInfoSize
        if let name = bytes.fourCC(at: tag), name == "Xing" || name == "Info" {
            guard let flags = bytes.bigEndian(at: tag + 4, width: 4) else { return true }
            var offset = tag + 8
            if flags & 1 != 0 {
                headerFrameCount = bytes.bigEndian(at: offset, width: 4).map { Int64($0) }
                offset += 4
            }
            let lame = offset + (flags & 2 != 0 ? 4 : 0) + (flags & 4 != 0 ? 100 : 0) + (flags & 8 != 0 ? 4 : 0)
            if let encoder = bytes.fourCC(at: lame), ["LAME", "Lavf", "Lavc"].contains(encoder),
               let delayAndPadding = bytes.bigEndian(at: lame + 21, width: 3) {
                // The LAME delay counts the encoder's priming; decoders add 528 + 1 more.
                encoderDelay = Int(delayAndPadding >> 12) + 529
                encoderPadding = max(0, Int(delayAndPadding & 0xFFF) - 529)
            }
            return true
        }
        if bytes.fourCC(at: 36) == "VBRI" {
            headerFrameCount = bytes.bigEndian(at: 36 + 14, width: 4).map { Int64($0) }
            return true
        }
        return false
    }
}
