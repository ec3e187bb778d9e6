import CFLAC

/// Decodes the packets of a `ChunkEncoder` stream back to interleaved Float32 (the room's side).
///
/// FLAC goes through libFLAC, the reference decoder, rather than libavcodec: a room links this
/// module without FFmpeg, whose dependency tree alone costs a small speaker some 20 MB of
/// resident memory (docs/EFFICIENCY.md). Each packet decodes on its own, in any order: the
/// decoder is given the stream's STREAMINFO once and then one frame at a time, flushed before
/// each. A corrupt packet (bad CRC, truncated, wrong format, trailing bytes) throws a
/// `MediaError` naming the reason, and the next packet decodes normally. After the first
/// packets, decoding allocates nothing beyond growing `output`.
///
/// Not thread-safe: use from one thread at a time.
public final class ChunkDecoder {
    public let codec: StreamCodec
    public let sampleRate: Int
    public let channelCount: Int

    private var flac: UnsafeMutablePointer<FLAC__StreamDecoder>?
    // The packet being decoded and what libFLAC's callbacks found in it.
    private var input = UnsafeRawBufferPointer(start: nil, count: 0)
    private var inputOffset = 0
    private var decoded: [Float] = []
    private var framesWritten = 0
    private var frameCount = 0
    private var mismatch: String?
    private var flacError: FLAC__StreamDecoderErrorStatus?

    private var inputName: String { "\(codec.wireName) stream" }

    /// - Parameter codecHeader: the encoder's `codecHeader` (FLAC STREAMINFO; ignored for PCM).
    /// - Throws: `MediaError.invalidArgument` when the header does not describe this format.
    public init(codec: StreamCodec, sampleRate: Int, channelCount: Int, codecHeader: [UInt8]) throws(MediaError) {
        self.codec = codec
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        let name = "\(codec.wireName) stream"
        guard (1...StreamCodec.maximumChannelCount).contains(channelCount), sampleRate > 0 else {
            throw MediaError(.invalidArgument, input: name, reason: "invalid format \(sampleRate) Hz × \(channelCount)")
        }
        guard codec == .flac else { return }

        guard let info = FLACFormat.parseStreamInfo(codecHeader) else {
            throw MediaError(.invalidArgument, input: name, reason: "codec header is \(codecHeader.count) bytes, not a \(FLACFormat.streamInfoSize)-byte FLAC STREAMINFO")
        }
        guard info.sampleRate == sampleRate, info.channelCount == channelCount else {
            throw MediaError(.invalidArgument, input: name, reason: "codec header says \(info.sampleRate) Hz × \(info.channelCount), stream says \(sampleRate) Hz × \(channelCount)")
        }
        guard info.maximumBlockSize >= FLACFormat.minimumEncoderFrameSize else {
            throw MediaError(.invalidArgument, input: name, reason: "codec header has an invalid maximum block size \(info.maximumBlockSize)")
        }
        try openFLAC(streamInfo: codecHeader)
    }

    deinit {
        if let flac { FLAC__stream_decoder_delete(flac) }
    }

    /// A libFLAC stream decoder that has read the stream's header ("fLaC" and STREAMINFO) and
    /// waits for frames.
    private func openFLAC(streamInfo: [UInt8]) throws(MediaError) {
        guard let flac = FLAC__stream_decoder_new() else {
            throw MediaError(.unsupported, input: inputName, reason: "out of memory")
        }
        self.flac = flac
        _ = FLAC__stream_decoder_set_md5_checking(flac, 0)
        let client = Unmanaged.passUnretained(self).toOpaque()
        let status = FLAC__stream_decoder_init_stream(
            flac,
            { _, buffer, bytes, client in
                Unmanaged<ChunkDecoder>.fromOpaque(client!).takeUnretainedValue().read(into: buffer!, count: bytes!)
            },
            nil, nil, nil, nil,
            { _, frame, channels, client in
                Unmanaged<ChunkDecoder>.fromOpaque(client!).takeUnretainedValue().write(frame!.pointee.header, channels!)
            },
            nil,
            { _, status, client in
                let decoder = Unmanaged<ChunkDecoder>.fromOpaque(client!).takeUnretainedValue()
                if decoder.flacError == nil { decoder.flacError = status }
            },
            client)
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            throw MediaError(.unsupported, input: inputName, reason: "libFLAC refused to open a decoder (status \(status.rawValue))")
        }
        // The last (and only) metadata block: type 0, STREAMINFO.
        let header: [UInt8] = Array("fLaC".utf8) + [0x80, 0, 0, UInt8(FLACFormat.streamInfoSize)] + streamInfo
        let opened = header.withUnsafeBytes { bytes -> Bool in
            input = bytes
            inputOffset = 0
            defer { input = UnsafeRawBufferPointer(start: nil, count: 0) }
            return FLAC__stream_decoder_process_until_end_of_metadata(flac) != 0
        }
        guard opened, flacError == nil, FLAC__stream_decoder_get_state(flac) == FLAC__STREAM_DECODER_SEARCH_FOR_FRAME_SYNC else {
            throw MediaError(.invalidArgument, input: inputName, reason: "libFLAC refused the codec header (\(flacError.map(Self.describe) ?? "state \(FLAC__stream_decoder_get_state(flac).rawValue)"))")
        }
    }

    /// libFLAC's read callback: the rest of the packet, then the end of the stream.
    private func read(into buffer: UnsafeMutablePointer<FLAC__byte>, count: UnsafeMutablePointer<Int>) -> FLAC__StreamDecoderReadStatus {
        let available = input.count - inputOffset
        guard available > 0, count.pointee > 0 else {
            count.pointee = 0
            return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM
        }
        let taken = min(available, count.pointee)
        UnsafeMutableRawPointer(buffer).copyMemory(from: input.baseAddress! + inputOffset, byteCount: taken)
        inputOffset += taken
        count.pointee = taken
        return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
    }

    /// libFLAC's write callback: checks the frame's format and interleaves it into `decoded`.
    private func write(_ header: FLAC__FrameHeader, _ channels: UnsafePointer<UnsafePointer<FLAC__int32>?>) -> FLAC__StreamDecoderWriteStatus {
        framesWritten += 1
        guard framesWritten == 1, mismatch == nil else { return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE }
        let count = Int(header.channels), frames = Int(header.blocksize), bits = Int(header.bits_per_sample)
        if count != channelCount {
            mismatch = "packet has \(count) channel\(count == 1 ? "" : "s"), stream has \(channelCount)"
        } else if Int(header.sample_rate) != sampleRate {
            mismatch = "packet is \(header.sample_rate) Hz, stream is \(sampleRate) Hz"
        } else if frames > StreamCodec.maximumChunkFrames || !(4...32).contains(bits) {
            mismatch = "packet of \(frames) frames at \(bits) bits is outside the stream's format"
        }
        guard mismatch == nil else { return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE }
        Self.resize(&decoded, to: frames * count)
        // A sample of `bits` bits scaled to [-1, 1): exact in Float up to 24 bits.
        let scale = 1 / Float(1 << (bits - 1))
        decoded.withUnsafeMutableBufferPointer { out in
            let destination = out.baseAddress!
            for channel in 0..<count {
                let source = channels[channel]!
                for i in 0..<frames { destination[i * count + channel] = Float(source[i]) * scale }
            }
        }
        frameCount = frames
        return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
    }

    /// Decodes one packet, replacing the contents of `output` with its interleaved samples
    /// (`channelCount` per frame). Returns the frame count. On error `output` is empty.
    public func decode(_ packet: [UInt8], into output: inout [Float]) throws(MediaError) -> Int {
        // `withUnsafeBytes` rethrows untyped errors: carry the typed one out in a Result.
        let result = packet.withUnsafeBytes { bytes in
            Result { () throws(MediaError) -> Int in try decode(bytes, into: &output) }
        }
        return try result.get()
    }

    /// Decodes one packet, replacing the contents of `output` with its interleaved samples
    /// (`channelCount` per frame). Returns the frame count. On error `output` is empty.
    public func decode(_ packet: UnsafeRawBufferPointer, into output: inout [Float]) throws(MediaError) -> Int {
        do {
            switch codec {
            case .pcm: return try decodePCM(packet, into: &output)
            case .flac: return try decodeFLAC(packet, into: &output)
            }
        } catch {
            output.removeAll(keepingCapacity: true)
            throw error
        }
    }

    private func corrupt(_ reason: String) -> MediaError {
        MediaError(.corrupt, input: inputName, reason: reason)
    }

    private func decodePCM(_ bytes: UnsafeRawBufferPointer, into output: inout [Float]) throws(MediaError) -> Int {
        let frameBytes = channelCount * MemoryLayout<Float>.size
        guard !bytes.isEmpty else { throw corrupt("empty packet") }
        guard bytes.count % frameBytes == 0 else {
            throw corrupt("packet of \(bytes.count) bytes is not a whole number of \(channelCount)-channel Float32 frames (truncated?)")
        }
        let frames = bytes.count / frameBytes
        guard frames <= StreamCodec.maximumChunkFrames else {
            throw corrupt("packet of \(frames) frames exceeds \(StreamCodec.maximumChunkFrames)")
        }
        Self.resize(&output, to: frames * channelCount)
        output.withUnsafeMutableBytes { out in
            #if _endian(little)
            out.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            #else
            for i in 0..<(frames * channelCount) {
                let bits = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self))
                out.storeBytes(of: Float(bitPattern: bits), toByteOffset: 4 * i, as: Float.self)
            }
            #endif
        }
        return frames
    }

    private func decodeFLAC(_ bytes: UnsafeRawBufferPointer, into output: inout [Float]) throws(MediaError) -> Int {
        let flac = flac!
        guard !bytes.isEmpty else { throw corrupt("empty packet") }
        // Whatever a bad packet left in libFLAC's reader goes; STREAMINFO stays.
        _ = FLAC__stream_decoder_flush(flac)
        input = bytes
        inputOffset = 0
        framesWritten = 0
        frameCount = 0
        mismatch = nil
        flacError = nil
        swap(&decoded, &output)
        defer {
            swap(&decoded, &output)
            input = UnsafeRawBufferPointer(start: nil, count: 0)
        }
        // One frame, then whatever follows it: nothing (the end of the stream), or a second
        // frame or stray bytes, which make the packet corrupt.
        if FLAC__stream_decoder_process_single(flac) != 0, framesWritten == 1, flacError == nil, mismatch == nil {
            _ = FLAC__stream_decoder_process_single(flac)
        }
        if let mismatch { throw corrupt(mismatch) }
        if framesWritten > 1 { throw corrupt("packet holds more than one FLAC frame") }
        if framesWritten == 1 && flacError == nil && inputOffset == bytes.count { return frameCount }
        throw failure(bytes)
    }

    /// Names what is wrong with a packet libFLAC refused, in one line.
    private func failure(_ bytes: UnsafeRawBufferPointer) -> MediaError {
        if bytes.count < 2 || bytes[0] != 0xFF || bytes[1] & 0xFE != 0xF8 {
            return corrupt("packet of \(bytes.count) bytes does not start with a FLAC frame")
        }
        if FLACFormat.crc16(bytes) != 0 {
            return corrupt("CRC mismatch in packet of \(bytes.count) bytes (corrupt or truncated)")
        }
        guard let flacError else {
            return corrupt("packet of \(bytes.count) bytes decoded to no audio")
        }
        return corrupt("undecodable FLAC frame (\(bytes.count) bytes): \(Self.describe(flacError))")
    }

    private static func describe(_ status: FLAC__StreamDecoderErrorStatus) -> String {
        switch status {
        case FLAC__STREAM_DECODER_ERROR_STATUS_LOST_SYNC: "lost sync"
        case FLAC__STREAM_DECODER_ERROR_STATUS_BAD_HEADER: "bad frame header"
        case FLAC__STREAM_DECODER_ERROR_STATUS_FRAME_CRC_MISMATCH: "frame CRC mismatch"
        case FLAC__STREAM_DECODER_ERROR_STATUS_UNPARSEABLE_STREAM: "unparseable frame"
        default: "libFLAC error \(status.rawValue)"
        }
    }

    /// Sets `array.count` to `count`, without touching the elements it keeps.
    private static func resize(_ array: inout [Float], to count: Int) {
        if array.count > count {
            array.removeLast(array.count - count)
        } else if array.count < count {
            array.append(contentsOf: repeatElement(0, count: count - array.count))
        }
    }
}
