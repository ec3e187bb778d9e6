import CFFmpeg

/// Decodes the packets of a `ChunkEncoder` stream back to interleaved Float32 (the speaker side).
///
/// Each packet decodes on its own, in any order. A corrupt packet (bad CRC, truncated, wrong
/// format) throws a `MediaError` naming the reason, and the decoder is reset so the next packet
/// decodes normally. Buffers are reused: after the first packets, decoding allocates nothing in
/// this type beyond growing `output` (libavcodec itself still allocates its small per-packet
/// reference structs).
///
/// Not thread-safe: use from one thread at a time.
public final class ChunkDecoder {
    public let codec: StreamCodec
    public let sampleRate: Int
    public let channelCount: Int

    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    /// Receives what follows the packet's frame (normally nothing): `avcodec_receive_frame`
    /// unreferences its argument first, even when it has nothing to return.
    private var spareFrame: UnsafeMutablePointer<AVFrame>?
    /// Padded copy of the current packet, reused while libavcodec holds no reference to it.
    private var packetBuffer: UnsafeMutablePointer<AVBufferRef>?
    /// The STREAMINFO, kept to open a fresh libavcodec context after a refused packet.
    private let codecHeader: [UInt8]

    private var inputName: String { "\(codec.wireName) stream" }

    /// - Parameter codecHeader: the encoder's `codecHeader` (FLAC STREAMINFO; ignored for PCM).
    /// - Throws: `MediaError.invalidArgument` when the header does not describe this format.
    public init(codec: StreamCodec, sampleRate: Int, channelCount: Int, codecHeader: [UInt8]) throws(MediaError) {
        _ = FFmpeg.quietLogging
        self.codec = codec
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.codecHeader = codecHeader
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
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        spareFrame = av_frame_alloc()
        guard packet != nil, frame != nil, spareFrame != nil else {
            throw MediaError(.unsupported, input: name, reason: "out of memory")
        }
        context = try openContext()
    }

    /// A libavcodec FLAC decoder opened with the stream's STREAMINFO.
    private func openContext() throws(MediaError) -> UnsafeMutablePointer<AVCodecContext> {
        guard let decoder = avcodec_find_decoder(AV_CODEC_ID_FLAC) else {
            throw MediaError(.unsupported, input: inputName, reason: "libavcodec has no FLAC decoder")
        }
        var allocated = avcodec_alloc_context3(decoder)
        guard let context = allocated, let extradata = av_mallocz(codecHeader.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
            avcodec_free_context(&allocated)
            throw MediaError(.unsupported, input: inputName, reason: "out of memory")
        }
        codecHeader.withUnsafeBytes { extradata.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        context.pointee.extradata = extradata.assumingMemoryBound(to: UInt8.self)
        context.pointee.extradata_size = Int32(codecHeader.count)
        context.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&context.pointee.ch_layout, Int32(channelCount))
        // Interleaved S32 (the decoder's default for > 16 bits would be planar on request only).
        context.pointee.request_sample_fmt = AV_SAMPLE_FMT_S32
        context.pointee.thread_count = 1
        // Check each frame's CRC-16 and fail on a mismatch (by default libavcodec ignores it).
        context.pointee.err_recognition = AV_EF_CRCCHECK | AV_EF_EXPLODE
        let status = avcodec_open2(context, decoder, nil)
        guard status >= 0 else {
            avcodec_free_context(&allocated)
            throw MediaError(.invalidArgument, input: inputName, reason: "cannot open the FLAC decoder with this codec header: \(FFmpeg.message(status))")
        }
        return context
    }

    /// Puts the decoder back to the stream's STREAMINFO after a refused packet. Flushing is not
    /// enough: a frame header that names another sample rate replaces libavcodec's STREAMINFO
    /// rate even when the frame is then refused, and later frames that leave the rate to
    /// STREAMINFO would decode as that rate and be refused too (found by fuzz-chunkdecoder).
    private func resetDecoder() {
        guard let fresh = try? openContext() else {
            avcodec_flush_buffers(context)
            return
        }
        avcodec_free_context(&context)
        context = fresh
    }

    deinit {
        av_buffer_unref(&packetBuffer)
        av_frame_free(&frame)
        av_frame_free(&spareFrame)
        av_packet_free(&packet)
        avcodec_free_context(&context)
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
        let context = context!, packet = packet!, frame = frame!
        // An empty packet would put libavcodec into draining mode.
        guard !bytes.isEmpty else { throw corrupt("empty packet") }
        try fillPacketBuffer(bytes)
        packet.pointee.buf = packetBuffer          // borrowed: avcodec_send_packet takes its own reference
        packet.pointee.data = packetBuffer!.pointee.data
        packet.pointee.size = Int32(bytes.count)
        let sent = avcodec_send_packet(context, packet)
        packet.pointee.buf = nil
        packet.pointee.data = nil
        packet.pointee.size = 0
        guard sent >= 0 else { throw failure(sent, bytes) }

        let received = avcodec_receive_frame(context, frame)
        guard received >= 0 else {
            throw received == FFmpeg.again ? failure(nil, bytes) : failure(received, bytes)
        }
        defer { av_frame_unref(frame) }
        // The whole packet must be one frame: anything left over is an error or a second frame.
        let rest = avcodec_receive_frame(context, spareFrame)
        guard rest == FFmpeg.again else {
            if rest >= 0 {
                av_frame_unref(spareFrame)
                resetDecoder()
                throw corrupt("packet holds more than one FLAC frame")
            }
            throw failure(rest, bytes)
        }

        let frames = Int(frame.pointee.nb_samples)
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        guard channels == channelCount else {
            resetDecoder()
            throw corrupt("packet has \(channels) channel\(channels == 1 ? "" : "s"), stream has \(channelCount)")
        }
        guard Int(frame.pointee.sample_rate) == sampleRate else {
            resetDecoder()
            throw corrupt("packet is \(frame.pointee.sample_rate) Hz, stream is \(sampleRate) Hz")
        }
        guard frame.pointee.format == AV_SAMPLE_FMT_S32.rawValue else {
            resetDecoder()
            let name = av_get_sample_fmt_name(AVSampleFormat(rawValue: frame.pointee.format)).map { String(cString: $0) } ?? "\(frame.pointee.format)"
            throw corrupt("decoder produced \(name) samples, expected s32")
        }
        let count = frames * channelCount
        Self.resize(&output, to: count)
        let source = UnsafeRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Int32.self)
        output.withUnsafeMutableBufferPointer { out in
            let destination = out.baseAddress!
            // S32 holds the 24-bit sample in its top bits: exact in Float, exact scaling.
            let scale: Float = 1.0 / 2_147_483_648.0
            for i in 0..<count { destination[i] = Float(source[i]) * scale }
        }
        return frames
    }

    /// Copies `bytes` into the reusable, zero-padded packet buffer (libavcodec's readers may look
    /// up to `AV_INPUT_BUFFER_PADDING_SIZE` bytes past the end).
    private func fillPacketBuffer(_ bytes: UnsafeRawBufferPointer) throws(MediaError) {
        let padding = Int(AV_INPUT_BUFFER_PADDING_SIZE)
        let needed = bytes.count + padding
        if let buffer = packetBuffer, av_buffer_is_writable(buffer) == 0 || buffer.pointee.size < needed {
            av_buffer_unref(&packetBuffer)
        }
        if packetBuffer == nil {
            // Room for a typical chunk at once; larger packets grow it.
            packetBuffer = av_buffer_alloc(max(needed, 64 * 1024))
            guard packetBuffer != nil else { throw MediaError(.unsupported, input: inputName, reason: "out of memory") }
        }
        let data = UnsafeMutableRawPointer(packetBuffer!.pointee.data!)
        data.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        (data + bytes.count).initializeMemory(as: UInt8.self, repeating: 0, count: padding)
    }

    /// Resets the decoder after a failed packet and names the problem in one line.
    private func failure(_ status: Int32?, _ bytes: UnsafeRawBufferPointer) -> MediaError {
        resetDecoder()
        if bytes.count < 2 || bytes[0] != 0xFF || bytes[1] & 0xFE != 0xF8 {
            return corrupt("packet of \(bytes.count) bytes does not start with a FLAC frame")
        }
        if FLACFormat.crc16(bytes) != 0 {
            return corrupt("CRC mismatch in packet of \(bytes.count) bytes (corrupt or truncated)")
        }
        guard let status else {
            return corrupt("packet of \(bytes.count) bytes decoded to no audio")
        }
        return corrupt("undecodable FLAC frame (\(bytes.count) bytes): \(FFmpeg.message(status))")
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
