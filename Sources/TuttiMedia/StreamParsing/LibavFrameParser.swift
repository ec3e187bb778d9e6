import CFFmpeg

/// libavcodec's bitstream parser for one codec (`av_parser_parse2`): finds frame boundaries in
/// bytes pushed in chunks of any size. It holds back the last frame until it sees the start of
/// the next one, or until `flush`.
final class LibavFrameParser {
    private var parser: UnsafeMutablePointer<AVCodecParserContext>?
    private var context: UnsafeMutablePointer<AVCodecContext>?
    /// Input copied with the zeroed padding libavcodec may read past the end.
    private var padded: [UInt8] = []

    init?(codec: AVCodecID) {
        guard let parser = av_parser_init(Int32(codec.rawValue)) else { return nil }
        self.parser = parser
        context = avcodec_alloc_context3(nil)
        guard let context else { return nil }
        context.pointee.codec_id = codec
        context.pointee.codec_type = AVMEDIA_TYPE_AUDIO
    }

    deinit {
        av_parser_close(parser)
        avcodec_free_context(&context)
    }

    /// What libavcodec's parser found for the last frame: its duration in samples, if known.
    var lastDuration: Int? {
        guard let d = parser?.pointee.duration, d > 0 else { return nil }
        return Int(d)
    }

    var sampleRate: Int { Int(context?.pointee.sample_rate ?? 0) }
    var channelCount: Int { Int(context?.pointee.ch_layout.nb_channels ?? 0) }

    /// Feeds `bytes`; calls `body` with each complete frame (valid only during the call) and
    /// its duration in samples when the parser knows it.
    func parse(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, Int?) throws(MediaError) -> Void) throws(MediaError) {
        guard !bytes.isEmpty, let parser, let context else { return }
        let padding = Int(AV_INPUT_BUFFER_PADDING_SIZE)
        if padded.count < bytes.count + padding { padded = [UInt8](repeating: 0, count: bytes.count + padding) }
        let result = padded.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in Result { () throws(MediaError) in
            buffer.copyMemory(from: bytes)
            (buffer.baseAddress! + bytes.count).initializeMemory(as: UInt8.self, repeating: 0, count: padding)
            var input = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var remaining = bytes.count
            while remaining > 0 {
                var output: UnsafeMutablePointer<UInt8>? = nil
                var outputSize: Int32 = 0
                let consumed = av_parser_parse2(parser, context, &output, &outputSize, input, Int32(remaining),
                                                FFmpeg.noPTS, FFmpeg.noPTS, 0)
                guard consumed >= 0 else { throw streamError(.corrupt, "libavcodec's parser failed: \(FFmpeg.message(consumed))") }
                input += Int(consumed)
                remaining -= Int(consumed)
                if outputSize > 0, let output {
                    try body(UnsafeRawBufferPointer(start: output, count: Int(outputSize)), lastDuration)
                } else if consumed == 0 {
                    break  // no progress (does not happen with libavcodec's audio parsers)
                }
            }
        } }
        try result.get()
    }

    /// End of input: delivers the frames held back.
    func flush(_ body: (UnsafeRawBufferPointer, Int?) throws(MediaError) -> Void) throws(MediaError) {
        guard let parser, let context else { return }
        for _ in 0..<64 {
            var output: UnsafeMutablePointer<UInt8>? = nil
            var outputSize: Int32 = 0
            _ = av_parser_parse2(parser, context, &output, &outputSize, nil, 0, FFmpeg.noPTS, FFmpeg.noPTS, 0)
            guard outputSize > 0, let output else { return }
            try body(UnsafeRawBufferPointer(start: output, count: Int(outputSize)), lastDuration)
        }
    }
}
