/// Finds the format of a byte stream from its first bytes: "RIFF….WAVE", "fLaC", "OggS" at the
/// start, otherwise (after any ID3v2 tags) an MPEG audio or ADTS frame header whose following
/// frame also starts with a matching header, within the first `window` bytes.
struct FormatSniffer {
    enum Outcome {
        /// Need more bytes.
        case undecided
        /// The format, and where in the buffer its data starts (bytes before it are garbage).
        case detected(StreamFormatHint, start: Int)
    }

    static let window = 64 * 1024
    /// Scanning for frame syncs: offsets below this have been ruled out.
    private var scanPosition = 0

    /// `buffer`: the bytes after any ID3v2 tags. `atEnd`: no more bytes will come.
    mutating func sniff(_ buffer: [UInt8], atEnd: Bool) throws(MediaError) -> Outcome {
        if buffer.count < 12 && !atEnd { return .undecided }
        func matches(_ text: String, at offset: Int) -> Bool {
            let ascii = Array(text.utf8)
            guard offset + ascii.count <= buffer.count else { return false }
            return buffer[offset..<offset + ascii.count].elementsEqual(ascii)
        }
        if matches("RIFF", at: 0) && matches("WAVE", at: 8) { return .detected(.wav, start: 0) }
        if matches("RF64", at: 0) && matches("WAVE", at: 8) { return .detected(.wav, start: 0) }
        if matches("fLaC", at: 0) { return .detected(.flac, start: 0) }
        if matches("OggS", at: 0) { return .detected(.ogg, start: 0) }

        let limit = min(buffer.count, Self.window)
        while scanPosition < limit {
            let i = scanPosition
            guard buffer[i] == 0xFF, i + 7 <= buffer.count else {
                if buffer[i] != 0xFF { scanPosition += 1; continue }
                // A possible sync without enough bytes to judge it yet.
                if atEnd { scanPosition += 1; continue }
                return .undecided
            }
            let candidate: (format: StreamFormatHint, length: Int, key: UInt32)?
            if let adts = ADTSHeader(buffer, at: i) {
                candidate = (.adts, adts.frameLength, adts.matchKey)
            } else if let mpeg = MPEGAudioHeader(buffer, at: i) {
                candidate = (.mp3, mpeg.frameLength, mpeg.matchKey)
            } else {
                candidate = nil
            }
            guard let candidate else { scanPosition += 1; continue }
            let next = i + candidate.length
            if next + 7 <= buffer.count {
                let nextKey = candidate.format == .adts
                    ? ADTSHeader(buffer, at: next)?.matchKey : MPEGAudioHeader(buffer, at: next)?.matchKey
                if nextKey == candidate.key { return .detected(candidate.format, start: i) }
                scanPosition += 1
                continue
            }
            if atEnd {
                // The stream holds a single frame: accept it only when it fills the stream exactly.
                if next == buffer.count { return .detected(candidate.format, start: i) }
                scanPosition += 1
                continue
            }
            return .undecided
        }
        if buffer.count >= Self.window || atEnd {
            if atEnd && buffer.count < 12 && buffer.count < Self.window {
                throw streamError(.notAudio, buffer.isEmpty
                    ? "empty stream (no audio data)"
                    : "not an audio stream (only \(buffer.count) bytes, no MP3, ADTS, FLAC, Ogg or WAV signature)")
            }
            throw streamError(.notAudio, "not an audio stream (no MP3, ADTS, FLAC, Ogg or WAV signature in the first \(Self.window / 1024) KiB)")
        }
        return .undecided
    }

    /// The total size of an ID3v2 tag starting at `offset` (header, body, optional footer),
    /// 0 when there is none, nil when fewer than 10 bytes are there to tell.
    static func id3TagSize(_ buffer: [UInt8], at offset: Int) -> Int? {
        guard buffer.count - offset >= 3 else { return nil }
        guard buffer[offset] == 0x49, buffer[offset + 1] == 0x44, buffer[offset + 2] == 0x33 else { return 0 }
        guard buffer.count - offset >= 10 else { return nil }
        let size = buffer[offset + 6..<offset + 10].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
        return 10 + size + (buffer[offset + 5] & 0x10 != 0 ? 10 : 0)
    }
}
