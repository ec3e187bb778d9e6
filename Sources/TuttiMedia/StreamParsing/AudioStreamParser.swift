/// An incremental audio stream parser in the manner of Apple's AudioFileStream: push bytes as
/// they arrive, in chunks of any size, and get the stream's description and its packets as soon
/// as they can be parsed. Parsing does not depend on how the bytes were split: the events for a
/// stream are the same whether it is pushed at once or one byte at a time.
///
/// Formats: MP3 (MPEG audio, after any ID3v2 tags), AAC in ADTS, native FLAC, Ogg (Opus,
/// Vorbis) and WAV (integer or float PCM, cut into packets of `pcmPacketFrames` frames; a data
/// chunk of unknown size, as written to pipes, runs to the end of the input). Without a hint
/// the format is sniffed from the first bytes. Frame boundaries of MP3, ADTS and FLAC come from
/// libavcodec's parsers, Ogg pages and packets from libogg.
///
/// Errors: a `MediaError` with a one-line reason (not audio, corrupt, truncated header,
/// unsupported codec). Every error is final: the parser's position in the stream is lost, so
/// later `push` and `finish` calls throw the same error; start a new parser to try again.
/// A stream cut inside a frame ends cleanly: complete packets are delivered, the partial frame
/// is dropped and counted in `discardedByteCount`. Only a stream cut before its header was
/// complete (no description yet) makes `finish()` throw (`.truncated` or `.notAudio`).
///
/// Not thread-safe: use from one thread at a time.
public final class AudioStreamParser {
    /// Frames per packet for PCM (WAV) streams; the last packet may be shorter.
    public static let pcmPacketFrames = 4096

    /// The format, once known (the hint, or what sniffing found).
    public private(set) var format: StreamFormatHint?
    /// Bytes consumed so far.
    public private(set) var byteCount: Int64 = 0

    private let hint: StreamFormatHint?
    private var sniffer = FormatSniffer()
    private var sniffBuffer: [UInt8] = []
    private var id3Remaining = 0
    private var id3Bytes = 0
    private var sniffDiscarded = 0
    private var parser: (any StreamFormatParser)?
    private var failure: MediaError?
    private var finished = false

    public init(format hint: StreamFormatHint? = nil) {
        _ = FFmpeg.quietLogging
        self.hint = hint
    }

    /// Bytes that were not part of any packet or header: garbage before the first frame, data
    /// between frames, a trailing tag, a partial final frame. ID3v2 tags are not counted.
    public var discardedByteCount: Int { sniffDiscarded + (parser?.discardedByteCount ?? 0) }

    /// Parses the next bytes of the stream. Returns the events they complete (possibly none).
    public func push(_ bytes: UnsafeRawBufferPointer) throws(MediaError) -> [ParsedEvent] {
        if let failure { throw failure }
        guard !finished else { throw streamError(.invalidArgument, "bytes pushed after finish()") }
        byteCount += Int64(bytes.count)
        var events: [ParsedEvent] = []
        do throws(MediaError) {
            if let parser {
                try parser.push(bytes, into: &events)
                return events
            }
            var rest = bytes
            if id3Remaining > 0 {
                let skip = min(id3Remaining, rest.count)
                id3Remaining -= skip
                rest = UnsafeRawBufferPointer(rebasing: rest[skip...])
            }
            sniffBuffer.append(contentsOf: rest)
            try advanceDetection(atEnd: false, into: &events)
        } catch {
            failure = error
            throw error
        }
        return events
    }

    /// Parses the next bytes of the stream. Returns the events they complete (possibly none).
    public func push(_ bytes: [UInt8]) throws(MediaError) -> [ParsedEvent] {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(MediaError) -> [ParsedEvent] in try push(buffer) }
        }
        return try result.get()
    }

    /// Ends the stream: returns what the parsers held back (libavcodec keeps the last frame
    /// until it sees the next one or the end). Further calls return nothing.
    public func finish() throws(MediaError) -> [ParsedEvent] {
        if let failure { throw failure }
        guard !finished else { return [] }
        finished = true
        var events: [ParsedEvent] = []
        do throws(MediaError) {
            if parser == nil {
                if id3Remaining > 0 {
                    throw streamError(.truncated, "stream ends inside its ID3v2 tag (\(id3Remaining) bytes missing)")
                }
                try advanceDetection(atEnd: true, into: &events)
            }
            guard let parser else {
                throw streamError(.notAudio, "not an audio stream (no MP3, ADTS, FLAC, Ogg or WAV signature)")
            }
            try parser.finish(into: &events)
        } catch {
            failure = error
            throw error
        }
        return events
    }

    /// Skips ID3v2 tags and sniffs the format; once known, starts its parser on the buffered bytes.
    private func advanceDetection(atEnd: Bool, into events: inout [ParsedEvent]) throws(MediaError) {
        while parser == nil {
            if hint == nil || hint == .mp3 || hint == .adts {
                guard let tagSize = FormatSniffer.id3TagSize(sniffBuffer, at: 0) else {
                    if !atEnd { return }
                    if hint == nil { _ = try sniffer.sniff(sniffBuffer, atEnd: true) }
                    break
                }
                if tagSize > 0 {
                    id3Bytes += tagSize
                    if tagSize <= sniffBuffer.count {
                        sniffBuffer.removeFirst(tagSize)
                    } else {
                        id3Remaining = tagSize - sniffBuffer.count
                        sniffBuffer.removeAll()
                        if atEnd { throw streamError(.truncated, "stream ends inside its ID3v2 tag (\(id3Remaining) bytes missing)") }
                        return
                    }
                    sniffer = FormatSniffer()
                    continue
                }
            }
            let detected: StreamFormatHint
            var start = 0
            if let hint {
                detected = hint
            } else {
                switch try sniffer.sniff(sniffBuffer, atEnd: atEnd) {
                case .undecided: return
                case .detected(let found, let offset):
                    detected = found
                    start = offset
                }
            }
            sniffDiscarded += start
            let newParser = Self.makeParser(detected)
            format = detected
            parser = newParser
            let buffered = sniffBuffer
            sniffBuffer = []
            var newEvents: [ParsedEvent] = []
            let result = buffered.withUnsafeBytes { all in
                Result { () throws(MediaError) in
                    try newParser.push(UnsafeRawBufferPointer(rebasing: all[start...]), into: &newEvents)
                }
            }
            events += newEvents
            try result.get()
        }
    }

    private static func makeParser(_ format: StreamFormatHint) -> any StreamFormatParser {
        switch format {
        case .mp3: MPEGStreamParser(kind: .mp3)
        case .adts: MPEGStreamParser(kind: .adts)
        case .flac: FLACStreamParser()
        case .ogg: OggStreamParser()
        case .wav: WAVStreamParser(packetFrames: pcmPacketFrames)
        }
    }
}
