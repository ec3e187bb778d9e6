import CFFmpeg

/// Encodes chunks of interleaved Float32 into self-contained packets of a `StreamCodec`, one
/// packet per chunk, for the network stream (the server side).
///
/// FLAC: each chunk becomes exactly one FLAC frame of exactly the chunk's frames, made by
/// libavcodec's encoder (S32 samples, 24 bits per raw sample). FLAC frames carry no state from
/// earlier frames, and the encoder has no look-ahead, so nothing is held back or flushed: a
/// packet decodes alone (with the stream's `codecHeader`). libavcodec only accepts frames of the
/// context's `frame_size` (smaller only as a stream's last frame), so the encoder keeps one
/// context per recent chunk size, and encodes chunks below FLAC's minimum frame size of 16 as the
/// last frame of a one-off context. The frame number in each FLAC header counts per context and
/// means nothing: chunks are placed by the wire protocol's timeline frames.
///
/// Cost (one core, level 5, 48 kHz stereo, 2048-frame chunks): about 500× real time to encode,
/// 1000× to decode. A new chunk size opens a context (some 80 µs), and so does every chunk under
/// 16 frames: fine for a stream's odd last chunk, too slow for a stream of tiny chunks.
///
/// Not thread-safe: use from one thread at a time.
public final class ChunkEncoder {
    public let codec: StreamCodec
    public let sampleRate: Int
    public let channelCount: Int
    /// What the decoder needs besides the packets, sent once per stream (`StreamStart.codecHeader`):
    /// FLAC's 34-byte STREAMINFO, or nothing for PCM.
    public let codecHeader: [UInt8]

    /// libavcodec FLAC compression level (0…12; 5 is the library's default).
    public let compressionLevel: Int

    private struct Context {
        var frameSize: Int
        var context: UnsafeMutablePointer<AVCodecContext>
        var lastUse: UInt64
        var pts: Int64
    }

    /// The FLAC stream's bit depth, and the most significant bits a chunk keeps.
    public static let streamBits = FLACFormat.bitsPerSample
    /// The fewest significant bits a chunk may be rounded to.
    public static let minimumSignificantBits = 8

    /// Open FLAC encoder contexts by frame size, least recently used evicted: the usual chunk size
    /// and the latest other one. Each holds about 7 MB (libavcodec 5.1 zeroes buffers for
    /// 8 channels of 65535 frames whatever the format).
    private var contexts: [Context] = []
    private static let maximumOpenContexts = 2
    private var useCounter: UInt64 = 0
    /// Refcounted S32 frame with room for `maximumChunkFrames`, refilled for every chunk.
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private let encoder: UnsafePointer<AVCodec>?

    private var inputName: String { "\(codec.wireName) encoder" }

    /// - Throws: `MediaError.invalidArgument` for a sample rate or channel count the codec cannot
    ///   carry (1…8 channels; FLAC: 1…655350 Hz).
    public init(codec: StreamCodec, sampleRate: Int, channelCount: Int, compressionLevel: Int = 5) throws(MediaError) {
        _ = FFmpeg.quietLogging
        self.codec = codec
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.compressionLevel = compressionLevel
        let name = "\(codec.wireName) encoder"
        guard (1...StreamCodec.maximumChannelCount).contains(channelCount) else {
            throw MediaError(.invalidArgument, input: name, reason: "\(channelCount) channels not supported (1…\(StreamCodec.maximumChannelCount))")
        }
        guard sampleRate > 0 else {
            throw MediaError(.invalidArgument, input: name, reason: "invalid sample rate \(sampleRate) Hz")
        }
        switch codec {
        case .pcm:
            encoder = nil
            codecHeader = []
        case .flac:
            // What libavcodec's encoder writes in frame headers: Hz below 65535, or tens of Hz below 655350.
            let expressible = sampleRate < 65535 || (sampleRate % 10 == 0 && sampleRate < 655_350)
            guard expressible else {
                throw MediaError(.invalidArgument, input: name, reason: "FLAC cannot carry \(sampleRate) Hz")
            }
            guard (0...12).contains(compressionLevel) else {
                throw MediaError(.invalidArgument, input: name, reason: "FLAC compression level \(compressionLevel) not in 0…12")
            }
            guard let flac = avcodec_find_encoder(AV_CODEC_ID_FLAC) else {
                throw MediaError(.unsupported, input: name, reason: "libavcodec has no FLAC encoder")
            }
            encoder = flac
            codecHeader = FLACFormat.streamInfo(sampleRate: sampleRate, channelCount: channelCount)
            frame = av_frame_alloc()
            packet = av_packet_alloc()
            guard let frame, packet != nil else {
                throw MediaError(.unsupported, input: name, reason: "out of memory")
            }
            frame.pointee.format = AV_SAMPLE_FMT_S32.rawValue
            frame.pointee.sample_rate = Int32(sampleRate)
            frame.pointee.nb_samples = Int32(StreamCodec.maximumChunkFrames)
            av_channel_layout_default(&frame.pointee.ch_layout, Int32(channelCount))
            let status = av_frame_get_buffer(frame, 0)
            guard status >= 0 else {
                throw MediaError(.unsupported, input: name, reason: "cannot allocate a frame: \(FFmpeg.message(status))")
            }
            // Open the usual chunk size now, so that unusable parameters fail here.
            let probe = try openContext(frameSize: 2048)
            contexts.append(Context(frameSize: 2048, context: probe, lastUse: 0, pts: 0))
        }
    }

    deinit {
        for entry in contexts {
            var context: UnsafeMutablePointer<AVCodecContext>? = entry.context
            avcodec_free_context(&context)
        }
        av_frame_free(&frame)
        av_packet_free(&packet)
    }

    /// Encodes `frames` frames (1…`StreamCodec.maximumChunkFrames`) of interleaved samples into
    /// one packet that decodes on its own to exactly `frames` frames.
    ///
    /// - Parameter significantBits: FLAC only: the samples are rounded to this many bits
    ///   (`ChunkEncoder.minimumSignificantBits` … 24), the depth of the source they came from. The
    ///   stream stays 24-bit; FLAC shifts out the zero low bits of each subframe ("wasted
    ///   bits"), so a 16-bit source costs what 16-bit FLAC costs (some 35 % less than the same
    ///   audio at 24 bits) and decodes to its exact samples.
    public func encode(_ samples: UnsafePointer<Float>, frames: Int, significantBits: Int = ChunkEncoder.streamBits) throws(MediaError) -> [UInt8] {
        var packet = [UInt8]()
        try encode(samples, frames: frames, significantBits: significantBits, into: &packet)
        return packet
    }

    /// Like `encode(_:frames:significantBits:)`, replacing the contents of `packet` (its storage
    /// is reused).
    public func encode(_ samples: UnsafePointer<Float>, frames: Int, significantBits: Int = ChunkEncoder.streamBits,
                       into packet: inout [UInt8]) throws(MediaError) {
        guard (1...StreamCodec.maximumChunkFrames).contains(frames) else {
            throw MediaError(.invalidArgument, input: inputName, reason: "chunk of \(frames) frames (must be 1…\(StreamCodec.maximumChunkFrames))")
        }
        guard (ChunkEncoder.minimumSignificantBits...ChunkEncoder.streamBits).contains(significantBits) else {
            throw MediaError(.invalidArgument, input: inputName, reason: "\(significantBits) significant bits (must be \(ChunkEncoder.minimumSignificantBits)…\(FLACFormat.bitsPerSample))")
        }
        switch codec {
        case .pcm: encodePCM(samples, count: frames * channelCount, into: &packet)
        case .flac: try encodeFLAC(samples, frames: frames, significantBits: significantBits, into: &packet)
        }
    }

    private func encodePCM(_ samples: UnsafePointer<Float>, count: Int, into packet: inout [UInt8]) {
        let bytes = count * MemoryLayout<Float>.size
        if packet.count != bytes {
            packet.removeAll(keepingCapacity: true)
            packet.append(contentsOf: repeatElement(0, count: bytes))
        }
        packet.withUnsafeMutableBytes { out in
            #if _endian(little)
            out.baseAddress!.copyMemory(from: samples, byteCount: bytes)
            #else
            for i in 0..<count {
                out.storeBytes(of: samples[i].bitPattern.littleEndian, toByteOffset: 4 * i, as: UInt32.self)
            }
            #endif
        }
    }

    private func encodeFLAC(_ samples: UnsafePointer<Float>, frames: Int, significantBits: Int, into output: inout [UInt8]) throws(MediaError) {
        let frame = frame!, packet = packet!
        // The encoder releases its reference after each packet, so this is normally free.
        frame.pointee.nb_samples = Int32(StreamCodec.maximumChunkFrames)
        var status = av_frame_make_writable(frame)
        guard status >= 0 else {
            throw MediaError(.unsupported, input: inputName, reason: "cannot reuse the frame buffer: \(FFmpeg.message(status))")
        }
        frame.pointee.nb_samples = Int32(frames)
        let s32 = UnsafeMutableRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Int32.self)
        Self.quantize(samples, count: frames * channelCount, bits: significantBits, into: s32)

        // Chunks below FLAC's minimum frame size: the small last frame of a one-off context.
        let oneOff = frames < FLACFormat.minimumEncoderFrameSize
        let slot: Int?
        let context: UnsafeMutablePointer<AVCodecContext>
        if oneOff {
            slot = nil
            context = try openContext(frameSize: FLACFormat.minimumEncoderFrameSize)
        } else {
            let index = try contextIndex(frameSize: frames)
            slot = index
            context = contexts[index].context
            frame.pointee.pts = contexts[index].pts
            contexts[index].pts += Int64(frames)
        }
        defer {
            if oneOff {
                var c: UnsafeMutablePointer<AVCodecContext>? = context
                avcodec_free_context(&c)
            }
        }

        status = avcodec_send_frame(context, frame)
        if status >= 0 {
            status = avcodec_receive_packet(context, packet)
        }
        guard status >= 0 else {
            // Do not trust the context's state after a failure.
            if let slot { dropContext(at: slot) }
            throw MediaError(.unsupported, input: inputName, reason: "FLAC encoding of \(frames) frames failed: \(FFmpeg.message(status))")
        }
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
        av_packet_unref(packet)
        // FLAC has no look-ahead: the frame is out, and nothing is left inside the encoder.
        let more = avcodec_receive_packet(context, packet)
        guard more == FFmpeg.again else {
            av_packet_unref(packet)
            if let slot { dropContext(at: slot) }
            throw MediaError(.unsupported, input: inputName, reason: "FLAC encoder returned more than one packet for one chunk (\(more))")
        }
    }

    /// Rounds to the nearest multiple of 2^(1 - bits) (ties to even), clips to
    /// [-1, 1 - 2^(1 - bits)] (NaN → 0) and stores as S32 with the 24 stream bits at the top, as
    /// libavcodec's FLAC encoder expects; below 24 bits the low stream bits are zero.
    static func quantize(_ source: UnsafePointer<Float>, count: Int, bits: Int, into destination: UnsafeMutablePointer<Int32>) {
        // Adding 1.5 × 2⁵² rounds a Double of magnitude < 2⁵¹ to an integer (ties to even), which
        // then sits in the low bits of its bit pattern: no libm call, no trapping conversion, so
        // the loop vectorizes. Float × 2^(bits-1) is exact in Double.
        let magic = 6_755_399_441_055_744.0
        let scale = Double(1 << (bits - 1))
        let shift = Int32(32 - bits)
        for i in 0..<count {
            var value = Double(source[i]) * scale
            value = value > scale - 1 ? scale - 1 : value
            value = value < -scale ? -scale : value
            value = value == value ? value : 0  // NaN
            let integer = Int32(truncatingIfNeeded: (value + magic).bitPattern)
            destination[i] = integer &<< shift
        }
    }

    private func contextIndex(frameSize: Int) throws(MediaError) -> Int {
        useCounter += 1
        if let index = contexts.firstIndex(where: { $0.frameSize == frameSize }) {
            contexts[index].lastUse = useCounter
            return index
        }
        let context = try openContext(frameSize: frameSize)
        if contexts.count >= Self.maximumOpenContexts,
           let oldest = contexts.indices.min(by: { contexts[$0].lastUse < contexts[$1].lastUse }) {
            dropContext(at: oldest)
        }
        contexts.append(Context(frameSize: frameSize, context: context, lastUse: useCounter, pts: 0))
        return contexts.count - 1
    }

    private func dropContext(at index: Int) {
        var context: UnsafeMutablePointer<AVCodecContext>? = contexts[index].context
        avcodec_free_context(&context)
        contexts.remove(at: index)
    }

    private func openContext(frameSize: Int) throws(MediaError) -> UnsafeMutablePointer<AVCodecContext> {
        guard let context = avcodec_alloc_context3(encoder) else {
            throw MediaError(.unsupported, input: inputName, reason: "out of memory")
        }
        context.pointee.sample_fmt = AV_SAMPLE_FMT_S32
        context.pointee.bits_per_raw_sample = Int32(FLACFormat.bitsPerSample)
        context.pointee.sample_rate = Int32(sampleRate)
        context.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
        av_channel_layout_default(&context.pointee.ch_layout, Int32(channelCount))
        context.pointee.frame_size = Int32(frameSize)
        context.pointee.compression_level = Int32(compressionLevel)
        context.pointee.thread_count = 1
        let status = avcodec_open2(context, encoder, nil)
        guard status >= 0 else {
            var optional: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&optional)
            throw MediaError(.unsupported, input: inputName, reason: "cannot open the FLAC encoder for \(sampleRate) Hz × \(channelCount), \(frameSize)-frame chunks: \(FFmpeg.message(status))")
        }
        return context
    }
}
