import CFFmpeg

/// Where audio comes from, as a user writes it: a file path, `-` for standard input, an
/// http(s) URL (HLS when its path ends in `.m3u8`), or `pipe:PATH` for a named pipe (like
/// Snapcast's pipe source). A pipe carries any format FFmpeg can probe, or raw PCM described as
/// `pipe:PATH?sampleformat=RATE:BITS:CHANNELS`.
public struct InputLocation: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case file
        case standardInput
        case namedPipe
        /// An http:// or https:// URL, fetched by Tutti (`HTTPByteSource`).
        case network
        /// An http(s) URL of an HLS playlist (its path ends in `.m3u8`), fetched by `HLSByteSource`.
        case hls
    }

    /// Raw PCM layout for pipes that carry no header.
    public struct RawFormat: Sendable, Equatable {
        public var sampleRate: Int
        public var bits: Int
        public var channels: Int
    }

    public let spec: String
    public let kind: Kind
    /// What FFmpeg opens.
    public let url: String
    public let raw: RawFormat?

    public init(_ spec: String) throws(MediaError) {
        self.spec = spec
        if spec == "-" {
            kind = .standardInput
            url = "pipe:0"
            raw = nil
            return
        }
        let lowered = spec.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            let path = lowered.prefix { $0 != "?" && $0 != "#" }
            kind = path.hasSuffix(".m3u8") ? .hls : .network
            url = spec
            raw = nil
            return
        }
        guard spec.hasPrefix("pipe:") else {
            kind = .file
            url = spec
            raw = nil
            return
        }
        kind = .namedPipe
        var path = String(spec.dropFirst("pipe:".count))
        var rawFormat: RawFormat? = nil
        if let query = path.firstIndex(of: "?") {
            let parameters = path[path.index(after: query)...]
            path = String(path[..<query])
            for parameter in parameters.split(separator: "&") {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0] == "sampleformat" else {
                    throw MediaError(.invalidArgument, input: spec, reason: "unknown pipe parameter \(parameter) (use sampleformat=RATE:BITS:CHANNELS)")
                }
                let fields = pair[1].split(separator: ":").compactMap { Int($0) }
                guard fields.count == 3, (8000...384_000).contains(fields[0]), [16, 24, 32].contains(fields[1]), (1...8).contains(fields[2]) else {
                    throw MediaError(.invalidArgument, input: spec, reason: "sampleformat must be RATE:BITS:CHANNELS, e.g. 48000:16:2 (bits 16, 24 or 32)")
                }
                rawFormat = RawFormat(sampleRate: fields[0], bits: fields[1], channels: fields[2])
            }
        }
        guard !path.isEmpty else { throw MediaError(.invalidArgument, input: spec, reason: "pipe: needs a path, e.g. pipe:/tmp/tutti.fifo") }
        url = path
        raw = rawFormat
    }

    /// A name for messages: the path, or "stdin".
    public var displayName: String { kind == .standardInput ? "stdin" : spec }

    /// Whether the input is not a local file that can be inspected by path (gapless boxes, tags).
    public var isStream: Bool { kind != .file }

    /// FFmpeg's demuxer and options for a raw PCM pipe, else nil and no options.
    func demuxer(options: inout OpaquePointer?) -> UnsafePointer<AVInputFormat>? {
        guard let raw else { return nil }
        av_dict_set(&options, "sample_rate", "\(raw.sampleRate)", 0)
        av_dict_set(&options, "channels", "\(raw.channels)", 0)
        return av_find_input_format(raw.bits == 16 ? "s16le" : raw.bits == 24 ? "s24le" : "s32le")
    }
}
