import CFFmpeg

/// Native FLAC: the "fLaC" signature and metadata blocks parsed here (STREAMINFO kept, the
/// others skipped as they stream past, pictures included), then frames split by libavcodec's
/// FLAC parser. Each frame is checked with its CRC-16, so a cut final frame is dropped.
final class FLACStreamParser: StreamFormatParser {
    private enum State {
        case signature
        case blockHeader
        /// Collecting a block's body (STREAMINFO) or skipping it.
        case blockBody(type: UInt8, remaining: Int, isLast: Bool)
        case frames
    }

    private var state = State.signature
    private var pending: [UInt8] = []
    private var streamInfo: [UInt8]?
    private let frames = LibavFrameParser(codec: AV_CODEC_ID_FLAC)
    private var timestamp: Int64 = 0
    private(set) var discardedByteCount = 0

    func push(_ bytes: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) throws(MediaError) {
        var rest = bytes
        while !rest.isEmpty {
            switch state {
            case .frames:
                guard let frames else { throw streamError(.unsupported, "libavcodec has no FLAC parser") }
                try frames.parse(rest) { (frame, duration) throws(MediaError) in handle(frame, duration, into: &events) }
                return
            case .signature, .blockHeader:
                let need = 4 - pending.count
                let take = min(need, rest.count)
                pending.append(contentsOf: rest[rest.startIndex..<rest.startIndex + take])
                rest = UnsafeRawBufferPointer(rebasing: rest[(rest.startIndex + take)...])
                guard pending.count == 4 else { return }
                let header = pending
                pending.removeAll()
                if case .signature = state {
                    guard header == Array("fLaC".utf8) else { throw streamError(.notAudio, "not a FLAC stream (no fLaC signature)") }
                    state = .blockHeader
                } else {
                    let type = header[0] & 0x7F
                    let length = Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
                    if streamInfo == nil {
                        guard type == 0, length == FLACFormat.streamInfoSize else {
                            throw streamError(.corrupt, "first FLAC metadata block is not a 34-byte STREAMINFO (type \(type), \(length) bytes)")
                        }
                    }
                    state = .blockBody(type: type, remaining: length, isLast: header[0] & 0x80 != 0)
                    if length == 0 { try endBlock(isLast: header[0] & 0x80 != 0, into: &events) }
                }
            case .blockBody(let type, let remaining, let isLast):
                let take = min(remaining, rest.count)
                if type == 0 && streamInfo == nil { pending.append(contentsOf: rest[rest.startIndex..<rest.startIndex + take]) }
                rest = UnsafeRawBufferPointer(rebasing: rest[(rest.startIndex + take)...])
                state = .blockBody(type: type, remaining: remaining - take, isLast: isLast)
                if remaining - take == 0 {
                    if type == 0 && streamInfo == nil {
                        streamInfo = pending
                        pending.removeAll()
                    }
                    try endBlock(isLast: isLast, into: &events)
                }
            }
        }
    }

    private func endBlock(isLast: Bool, into events: inout [ParsedEvent]) throws(MediaError) {
        guard isLast else { state = .blockHeader; return }
        state = .frames
        guard let streamInfo, let info = FLACFormat.parseStreamInfo(streamInfo), info.sampleRate > 0 else {
            throw streamError(.corrupt, "FLAC STREAMINFO has no sample rate")
        }
        let minBlock = Int(streamInfo[0]) << 8 | Int(streamInfo[1])
        var total: UInt64 = 0
        for i in 13..<18 { total = total << 8 | UInt64(streamInfo[i]) }
        total &= (1 << 36) - 1
        events.append(.format(StreamDescription(
            container: .flac, codec: .flac, codecName: "flac", sampleRate: info.sampleRate,
            channelCount: info.channelCount, bitsPerSample: info.bitsPerSample,
            decoderConfiguration: streamInfo,
            framesPerPacket: minBlock == info.maximumBlockSize ? minBlock : nil,
            totalFrames: total > 0 ? Int64(total) : nil)))
    }

    func finish(into events: inout [ParsedEvent]) throws(MediaError) {
        guard case .frames = state else {
            throw streamError(.truncated, "FLAC stream ends inside its header (signature or metadata blocks)")
        }
        try frames?.flush { (frame, duration) throws(MediaError) in handle(frame, duration, into: &events) }
    }

    private func handle(_ frame: UnsafeRawBufferPointer, _ duration: Int?, into events: inout [ParsedEvent]) {
        // A frame starts with the 14-bit sync 0xFFF8/9 and its CRC-16 over everything is 0.
        guard frame.count >= 6, frame[0] == 0xFF, frame[1] & 0xFE == 0xF8, FLACFormat.crc16(frame) == 0 else {
            discardedByteCount += frame.count
            return
        }
        events.append(.packet(StreamPacket(bytes: [UInt8](frame), frameCount: duration, timestamp: timestamp)))
        timestamp += Int64(duration ?? 0)
    }
}
