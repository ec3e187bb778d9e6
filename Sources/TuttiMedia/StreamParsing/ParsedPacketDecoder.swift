import CFFmpeg

/// Decodes the packets of an `AudioStreamParser` stream with libavcodec, configured only from
/// its `StreamDescription`: for players of pushed streams (`SampleBufferRenderer`), which get
/// interleaved Float32 at the stream's own rate and channel count, and as a check that a
/// description and its packets are complete. Counts the decoded frames (no gapless trimming:
/// MP3 delay/padding and Opus pre-skip are in the count). Packets the codec rejects are counted
/// and skipped, so one bad packet costs its own audio only.
///
/// Not thread-safe: use from one thread at a time.
public final class ParsedPacketDecoder {
    /// libavcodec's name of the codec, and the channels its frames must have.
    public let codecName: String
    public let channelCount: Int
    /// Frames decoded so far.
    public private(set) var frameCount: Int64 = 0
    /// Packets the decoder rejected.
    public private(set) var rejectedPacketCount = 0

    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?

    public convenience init(_ description: StreamDescription) throws(MediaError) {
        try self.init(codecName: description.codecName, sampleRate: description.sampleRate, channelCount: description.channelCount,
                      decoderConfiguration: description.decoderConfiguration, pcm: description.pcm)
    }

    /// A decoder of packets of libavcodec's codec `codecName` (an AirPlay sender's `alac`, with
    /// its magic cookie as `decoderConfiguration`), given what a container would have said.
    public init(codecName: String, sampleRate: Int, channelCount: Int, decoderConfiguration config: [UInt8] = [], pcm: PCMLayout? = nil) throws(MediaError) {
        _ = FFmpeg.quietLogging
        self.codecName = codecName
        self.channelCount = channelCount
        guard let descriptor = avcodec_descriptor_get_by_name(codecName),
              let decoder = avcodec_find_decoder(descriptor.pointee.id) else {
            throw streamError(.unsupported, "libavcodec has no decoder for \(codecName)")
        }
        context = avcodec_alloc_context3(decoder)
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        guard let context else { throw streamError(.unsupported, "out of memory") }
        context.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&context.pointee.ch_layout, Int32(channelCount))
        if let pcm {
            context.pointee.block_align = Int32(pcm.bytesPerFrame)
            context.pointee.bits_per_coded_sample = Int32(pcm.bitsPerSample)
        }
        if !config.isEmpty, let extradata = av_mallocz(config.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) {
            config.withUnsafeBytes { extradata.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            context.pointee.extradata = extradata.assumingMemoryBound(to: UInt8.self)
            context.pointee.extradata_size = Int32(config.count)
        }
        context.pointee.thread_count = 1
        let status = avcodec_open2(context, decoder, nil)
        guard status >= 0 else {
            throw streamError(.unsupported, "cannot open the \(codecName) decoder: \(FFmpeg.message(status))")
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
        var unused: [Float] = []
        return decode(bytes, keeping: false, appendingTo: &unused)
    }

    /// Decodes one packet, appending the frames the codec released (interleaved Float32) to
    /// `output`. Returns the frames appended.
    @discardableResult
    public func decode(_ bytes: [UInt8], appendingTo output: inout [Float]) -> Int {
        decode(bytes, keeping: true, appendingTo: &output)
    }

    /// End of stream: drains the decoder; returns the frames it still produced.
    @discardableResult
    public func finish() -> Int {
        var unused: [Float] = []
        return finish(keeping: false, appendingTo: &unused)
    }

    /// End of the stream (or of a contiguous run): appends the frames the codec still holds.
    @discardableResult
    public func finish(appendingTo output: inout [Float]) -> Int {
        finish(keeping: true, appendingTo: &output)
    }

    private func decode(_ bytes: [UInt8], keeping: Bool, appendingTo output: inout [Float]) -> Int {
        guard let packet, !bytes.isEmpty, av_new_packet(packet, Int32(bytes.count)) >= 0 else { return 0 }
        bytes.withUnsafeBytes { packet.pointee.data.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count) }
        let status = avcodec_send_packet(context, packet)
        av_packet_unref(packet)
        if status < 0 { rejectedPacketCount += 1 }
        return receive(keeping: keeping, appendingTo: &output)
    }

    private func finish(keeping: Bool, appendingTo output: inout [Float]) -> Int {
        _ = avcodec_send_packet(context, nil)
        return receive(keeping: keeping, appendingTo: &output)
    }

    private func receive(keeping: Bool, appendingTo output: inout [Float]) -> Int {
        guard let frame else { return 0 }
        var produced = 0
        while avcodec_receive_frame(context, frame) == 0 {
            produced += keeping ? append(frame, to: &output) : Int(frame.pointee.nb_samples)
            av_frame_unref(frame)
        }
        frameCount += Int64(produced)
        return produced
    }

    /// Interleaves any of libavcodec's sample formats into Float32 with the usual scalings
    /// (integer full scale maps to ±1, as libswresample does), so FLAC and PCM stay exact.
    private func append(_ frame: UnsafeMutablePointer<AVFrame>, to output: inout [Float]) -> Int {
        let frames = Int(frame.pointee.nb_samples)
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        guard frames > 0, channels == channelCount else { return 0 }
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        let base = output.count
        output.append(contentsOf: repeatElement(0, count: frames * channels))
        let planes = frame.pointee.extended_data!
        output.withUnsafeMutableBufferPointer { buffer in
            let out = buffer.baseAddress! + base
            func convert<T>(_ type: T.Type, _ value: (T) -> Float) {
                for c in 0..<channels {
                    let plane = UnsafeRawPointer(planes[planar ? c : 0]!).assumingMemoryBound(to: T.self)
                    for i in 0..<frames {
                        out[i * channels + c] = value(planar ? plane[i] : plane[i * channels + c])
                    }
                }
            }
            switch format {
            case AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_FLTP: convert(Float.self) { $0 }
            case AV_SAMPLE_FMT_DBL, AV_SAMPLE_FMT_DBLP: convert(Double.self) { Float($0) }
            case AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P: convert(Int16.self) { Float($0) * (1.0 / 32768.0) }
            case AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P: convert(Int32.self) { Float($0) * (1.0 / 2_147_483_648.0) }
            case AV_SAMPLE_FMT_U8, AV_SAMPLE_FMT_U8P: convert(UInt8.self) { (Float($0) - 128) * (1.0 / 128.0) }
            default: break  // not produced by any audio decoder Tutti opens
            }
        }
        return frames
    }
}
