import CFFmpeg

/// Small helpers around libav* C conventions.
enum FFmpeg {
    /// The library's message for an error code, e.g. "Invalid data found when processing input".
    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        if av_strerror(code, &buffer, buffer.count) < 0 { return "error \(code)" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether libavcodec's descriptor of `codec` says it is lossy.
    static func isLossy(_ codec: AVCodecID) -> Bool {
        guard let descriptor = avcodec_descriptor_get(codec) else { return false }
        return descriptor.pointee.props & AV_CODEC_PROP_LOSSY != 0
    }

    static let eof = tutti_averror_eof()
    static let again = tutti_averror_eagain()
    static let noPTS = tutti_av_nopts_value()

    /// libav* logs warnings to stderr by default; Tutti reports problems itself, one line per input.
    static let quietLogging: Void = { tutti_av_log_quiet(AV_LOG_QUIET) }()

    static func dictionaryValue(_ dict: OpaquePointer?, _ key: String) -> String? {
        guard let dict, let entry = av_dict_get(dict, key, nil, 0), let value = entry.pointee.value else { return nil }
        let string = String(cString: value).trimmingWhitespace()
        return string.isEmpty ? nil : string
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
