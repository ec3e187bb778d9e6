/// RIFF WAVE (and RF64) with integer or float PCM: the header parsed here, then the data chunk
/// cut into packets of `packetFrames` frames. A data size of 0 or 0xFFFFFFFF (a WAV written to
/// a pipe, or RF64's placeholder) means "to the end of the input". Chunks other than "fmt " are
/// skipped as they stream past. A partial final frame is dropped.
final class WAVStreamParser: StreamFormatParser {
    private enum State {
        case riffHeader
        case chunkHeader
        case fmtBody(remaining: Int)
        case skip(remaining: Int)
        case data
        case trailing
    }

    private let packetFrames: Int
    private var state = State.riffHeader
    private var pending: [UInt8] = []
    private var layout: PCMLayout?
    private var channels = 0
    private var sampleRate = 0
    private var codecName = ""
    private var dataRemaining: Int64?
    private var packet: [UInt8] = []
    private var timestamp: Int64 = 0
    private(set) var discardedByteCount = 0

    init(packetFrames: Int) { self.packetFrames = packetFrames }

    func push(_ bytes: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) throws(MediaError) {
        var rest = Slice(base: bytes, bounds: bytes.indices)
        while !rest.isEmpty {
            switch state {
            case .riffHeader, .chunkHeader:
                let size = { if case .riffHeader = state { 12 } else { 8 } }()
                let take = min(size - pending.count, rest.count)
                pending.append(contentsOf: rest.prefix(take))
                rest = rest.dropFirst(take)
                guard pending.count == size else { return }
                let header = pending
                pending.removeAll()
                if size == 12 {
                    guard header.fourCC(at: 0) == "RIFF" || header.fourCC(at: 0) == "RF64", header.fourCC(at: 8) == "WAVE" else {
                        throw streamError(.notAudio, "not a WAV stream (no RIFF/WAVE header)")
                    }
                    state = .chunkHeader
                } else {
                    try startChunk(id: header.fourCC(at: 0) ?? "????",
                                   size: Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16 | Int(header[7]) << 24,
                                   into: &events)
                }
            case .fmtBody(let remaining):
                let take = min(remaining, rest.count)
                pending.append(contentsOf: rest.prefix(take))
                rest = rest.dropFirst(take)
                state = .fmtBody(remaining: remaining - take)
                if remaining == take {
                    try readFormat(pending)
                    pending.removeAll()
                    state = .chunkHeader
                }
            case .skip(let remaining):
                let take = min(remaining, rest.count)
                rest = rest.dropFirst(take)
                state = remaining == take ? .chunkHeader : .skip(remaining: remaining - take)
            case .data:
                guard let layout else { return }
                var take = rest.count
                if let dataRemaining { take = Int(min(Int64(take), dataRemaining)) }
                let packetBytes = packetFrames * layout.bytesPerFrame
                var chunk = rest.prefix(take)
                rest = rest.dropFirst(take)
                dataRemaining = dataRemaining.map { $0 - Int64(take) }
                while !chunk.isEmpty {
                    let room = min(packetBytes - packet.count, chunk.count)
                    packet.append(contentsOf: chunk.prefix(room))
                    chunk = chunk.dropFirst(room)
                    if packet.count == packetBytes { emitPacket(into: &events) }
                }
                if dataRemaining == 0 {
                    emitPacket(into: &events)
                    state = .trailing
                }
            case .trailing:
                return  // chunks after the data (LIST tags): not audio
            }
        }
    }

    private func startChunk(id: String, size: Int, into events: inout [ParsedEvent]) throws(MediaError) {
        switch id {
        case "fmt ":
            guard (16...1024).contains(size) else { throw streamError(.corrupt, "WAV fmt chunk has an invalid size \(size)") }
            state = .fmtBody(remaining: size + size % 2)
        case "data":
            guard let layout else { throw streamError(.corrupt, "WAV data chunk comes before the fmt chunk") }
            let unknown = size == 0 || size == 0xFFFF_FFFF
            dataRemaining = unknown ? nil : Int64(size)
            state = .data
            events.append(.format(StreamDescription(
                container: .wav, codec: .pcm, codecName: codecName, sampleRate: sampleRate,
                channelCount: channels, bitsPerSample: layout.bitsPerSample, framesPerPacket: packetFrames,
                totalFrames: unknown ? nil : Int64(size / layout.bytesPerFrame), pcm: layout)))
            if size == 0 && !unknown { state = .trailing }
        default:
            state = size == 0 ? .chunkHeader : .skip(remaining: size + size % 2)
        }
    }

    private func readFormat(_ body: [UInt8]) throws(MediaError) {
        func u16(_ i: Int) -> Int { Int(body[i]) | Int(body[i + 1]) << 8 }
        func u32(_ i: Int) -> Int { u16(i) | u16(i + 2) << 16 }
        var tag = u16(0)
        channels = u16(2)
        sampleRate = u32(4)
        let blockAlign = u16(12)
        let bits = u16(14)
        if tag == 0xFFFE {
            guard body.count >= 26 else { throw streamError(.corrupt, "WAV extensible fmt chunk is too short") }
            tag = u16(24)  // the sub-format GUID starts with the format tag
        }
        guard channels > 0, sampleRate > 0 else { throw streamError(.corrupt, "WAV fmt chunk has no channels or sample rate") }
        let isFloat: Bool
        switch (tag, bits) {
        case (1, 8): codecName = "pcm_u8"; isFloat = false
        case (1, 16), (1, 24), (1, 32): codecName = "pcm_s\(bits)le"; isFloat = false
        case (3, 32), (3, 64): codecName = "pcm_f\(bits)le"; isFloat = true
        default:
            throw streamError(.unsupported, "WAV format tag \(tag) with \(bits) bits per sample is not integer or float PCM")
        }
        guard blockAlign == channels * bits / 8 else {
            throw streamError(.corrupt, "WAV block align \(blockAlign) does not match \(channels) channels of \(bits) bits")
        }
        layout = PCMLayout(bitsPerSample: bits, isFloat: isFloat, bytesPerFrame: blockAlign)
    }

    private func emitPacket(into events: inout [ParsedEvent]) {
        guard let layout else { return }
        let whole = packet.count - packet.count % layout.bytesPerFrame
        discardedByteCount += packet.count - whole
        if whole > 0 {
            let frames = whole / layout.bytesPerFrame
            events.append(.packet(StreamPacket(bytes: Array(packet[0..<whole]), frameCount: frames, timestamp: timestamp)))
            timestamp += Int64(frames)
        }
        packet.removeAll(keepingCapacity: true)
    }

    func finish(into events: inout [ParsedEvent]) throws(MediaError) {
        switch state {
        case .data: emitPacket(into: &events)
        case .trailing: break
        default: throw streamError(.truncated, "WAV stream ends inside its header, before the data chunk")
        }
    }
}
