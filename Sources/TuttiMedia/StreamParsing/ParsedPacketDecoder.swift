import CFFmpeg

/// Decodes the packets of an `AudioStreamParser` stream with libavcodec, configured only from
/// its `StreamDescription`: a check that the description and packets are complete, and a
/// starting point for players of pushed streams. Counts the decoded frames (no gapless
/// trimming: MP3 delay/padding and Opus pre-skip are in the count).
///
/// Not thread-safe: use from one thread at a time.
public final class ParsedPacketDecoder {
    public let description: StreamDescription
    /// Frames decoded so far.
    public private(set) var frameCount: Int64 = 0
    /// Packets the decoder rejected.
    public private(set) var rejectedPacketCount = 0

    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?

    public init(_ description: StreamDescription) throws(MediaError) {
        _ = FFmpeg.quietLogging
        self.description = description
        guard let descriptor = avcodec_descriptor_get_by_name(description.codecName),
              let decoder = avcodec_find_decoder(descriptor.pointee.id) else {
            throw streamError(.unsupported, "libavcodec has no decoder for \(description.codecName)")
        }
        context = avcodec_alloc_context3(decoder)
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        guard let context else { throw streamError(.unsupported, "out of memory") }
        context.pointee.sample_rate = Int32(description.sampleRate)
        av_channel_layout_default(&context.pointee.ch_layout, Int32(description.channelCount))
        if let pcm = description.pcm {
            context.pointee.block_align = Int32(pcm.bytesPerFrame)
            context.pointee.bits_per_coded_sample = Int32(pcm.bitsPerSample)
        }
        let config = description.decoderConfiguration
        if !config.isEmpty, let extradata = av_mallocz(config.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) {
            config.withUnsafeBytes { extradata.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            context.pointee.extradata = extradata.assumingMemoryBound(to: UInt8.self)
            context.pointee.extradata_size = Int32(config.count)
        }
        context.pointee.thread_count = 1
        let status = avcodec_open2(context, decoder, nil)
        guard status >= 0 else {
            throw streamError(.unsupported, "cannot open the \(description.codecName) decoder: \(FFmpeg.message(status))")
        }
    }

    deinit {
        av_frame_free(&frame)
        av_packet_free(&packet)
        avcodec_free_context(&context)
    }

    /// Decodes one packet; returns the frames it produced (decoders may lag by a packet).
    @discardableResult
    public func decode(_ bytes: [UInt8]) -> Int {
        guard let packet, !bytes.isEmpty, av_new_packet(packet, Int32(bytes.count)) >= 0 else { return 0 }
        bytes.withUnsafeBytes { packet.pointee.data.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count) }
        let status = avcodec_send_packet(context, packet)
        av_packet_unref(packet)
        if status < 0 { rejectedPacketCount += 1 }
        return receive()
    }

    /// End of stream: drains the decoder; returns the frames it still produced.
    @discardableResult
    public func finish() -> Int {
        _ = avcodec_send_packet(context, nil)
        return receive()
    }

    private func receive() -> Int {
        var produced = 0
        while avcodec_receive_frame(context, frame) == 0 {
            produced += Int(frame?.pointee.nb_samples ?? 0)
            av_frame_unref(frame)
        }
        frameCount += Int64(produced)
        return produced
    }
}
