/// What an AirPlay 1 sender announces it will send (`ANNOUNCE`, an SDP body): the audio's
/// encoding, rate and channels, frames per packet, and whether it is encrypted.
///
/// Two encodings are taken: `L16` (16-bit big-endian PCM, pyatv's) and `AppleLossless` (ALAC,
/// iTunes' and PipeWire's); the fmtp line gives the ALAC parameters either way. An encrypted
/// stream (`rsaaeskey`, `aesiv`) is refused: its key is wrapped with Apple's own RSA key.
public struct RAOPAnnouncement: Sendable, Equatable {
    public enum Encoding: String, Sendable, Equatable {
        case l16 = "L16"
        case appleLossless = "AppleLossless"
    }

    public var encoding: Encoding
    public var sampleRate: Int
    public var channelCount: Int
    public var bitsPerSample: Int
    /// Frames in each RTP packet (fmtp's first parameter; 352 for every known sender).
    public var framesPerPacket: Int
    /// The RTP payload type the audio packets carry (96).
    public var payloadType: Int
    /// The sender's session name (`s=`) and origin user (`o=`): for the log.
    public var sessionName: String
    /// ALAC's eleven fmtp parameters as announced (empty when the fmtp line had none): frames
    /// per packet, compatible version, bit depth, pb, mb, kb, channels, max run, max frame
    /// bytes, average bit rate, sample rate. A compressed frame's decoder needs them
    /// (`alacMagicCookie`).
    public var alacParameters: [Int] = []

    /// Why an announcement is refused, in one line.
    public struct Refusal: Error, Equatable, Sendable {
        /// The RTSP status to answer with: 400 (malformed) or 415 (a format not taken).
        public var status: Int
        public var message: String
    }

    /// The largest SDP taken, and the most lines.
    public static let maximumLines = 64

    public init(encoding: Encoding, sampleRate: Int, channelCount: Int, bitsPerSample: Int = 16, framesPerPacket: Int = 352,
                payloadType: Int = 96, sessionName: String = "") {
        self.encoding = encoding
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.bitsPerSample = bitsPerSample
        self.framesPerPacket = framesPerPacket
        self.payloadType = payloadType
        self.sessionName = sessionName
    }

    public init(sdp bytes: [UInt8]) throws(Refusal) {
        func bad(_ message: String) -> Refusal { Refusal(status: 400, message: message) }
        func unsupported(_ message: String) -> Refusal { Refusal(status: 415, message: message) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw bad("the SDP is not UTF-8") }
        let lines = text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        guard lines.count <= Self.maximumLines else { throw bad("the SDP has more than \(Self.maximumLines) lines") }
        var media: (format: Int, count: Int)?
        var rtpmap: [Int: Substring] = [:]
        var fmtp: [Int: Substring] = [:]
        var session = ""
        for line in lines {
            let line = line.hasSuffix("\r") ? line.dropLast() : line
            guard line.count >= 2, line.dropFirst().first == "=" else { throw bad("SDP line \"\(line.prefix(48))\" is not TYPE=VALUE") }
            let value = line.dropFirst(2)
            switch line.first {
            case "s": session = String(value.prefix(64))
            case "m":
                guard media == nil else { throw unsupported("the SDP announces more than one medium") }
                let fields = value.split(separator: " ")
                guard fields.count >= 4, fields[0] == "audio", fields[2] == "RTP/AVP", let format = Int(fields[3]), (0...127).contains(format) else {
                    throw unsupported("the SDP's medium \"\(value.prefix(48))\" is not RTP audio")
                }
                media = (format, fields.count - 3)
            case "a":
                if value.hasPrefix("rsaaeskey:") || value.hasPrefix("aesiv:") || value.hasPrefix("fpaeskey:") {
                    throw unsupported("the stream is encrypted (\(value.prefix(while: { $0 != ":" }))): this receiver takes unencrypted AirPlay only")
                }
                for (prefix, table) in [("rtpmap:", 0), ("fmtp:", 1)] where value.hasPrefix(prefix) {
                    let rest = value.dropFirst(prefix.count)
                    guard let space = rest.firstIndex(of: " "), let format = Int(rest[..<space]) else { throw bad("SDP attribute \"\(value.prefix(48))\" names no format") }
                    if table == 0 { rtpmap[format] = rest[rest.index(after: space)...] } else { fmtp[format] = rest[rest.index(after: space)...] }
                }
            default: continue
            }
        }
        guard let media else { throw bad("the SDP announces no medium") }
        guard media.count == 1 else { throw unsupported("the SDP offers \(media.count) formats; AirPlay sends one") }
        guard let map = rtpmap[media.format] else { throw bad("the SDP has no rtpmap for format \(media.format)") }
        let mapFields = map.split(separator: "/")
        guard let name = mapFields.first else { throw bad("rtpmap \"\(map.prefix(48))\" is empty") }
        let parameters = fmtp[media.format].map { $0.split(separator: " ").map { Int($0) } } ?? []
        guard parameters.allSatisfy({ $0 != nil }) else { throw bad("fmtp \"\(fmtp[media.format]!.prefix(64))\" is not numbers") }
        let numbers = parameters.map { $0! }
        // ALAC's fmtp: frames per packet, compatible version, bit depth, pb, mb, kb, channels,
        // max run, max frame bytes, average bit rate, sample rate.
        var rate = 44100, channels = 2, bits = 16, frames = 352
        if numbers.count == 11 {
            frames = numbers[0]; bits = numbers[2]; channels = numbers[6]; rate = numbers[10]
        } else if !numbers.isEmpty {
            throw bad("fmtp has \(numbers.count) parameters; ALAC's has 11")
        }
        let encoding: Encoding
        switch name {
        case "L16":
            encoding = .l16
            // L16's rtpmap carries rate and channels itself (L16/44100/2).
            if mapFields.count >= 2 { guard let value = Int(mapFields[1]) else { throw bad("rtpmap rate \"\(mapFields[1].prefix(16))\" is not a number") }; rate = value }
            if mapFields.count >= 3 { guard let value = Int(mapFields[2]) else { throw bad("rtpmap channels \"\(mapFields[2].prefix(16))\" is not a number") }; channels = value }
        case "AppleLossless":
            encoding = .appleLossless
        default:
            throw unsupported("the audio is \(name.prefix(32)); this receiver takes L16 and AppleLossless")
        }
        guard bits == 16 else { throw unsupported("the audio has \(bits)-bit samples; AirPlay's are 16-bit") }
        guard (1...2).contains(channels) else { throw unsupported("the audio has \(channels) channels; AirPlay's has 1 or 2") }
        guard (8000...192_000).contains(rate) else { throw unsupported("the audio's rate \(rate) Hz is not an audio rate") }
        guard (1...4096).contains(frames) else { throw unsupported("\(frames) frames a packet; AirPlay sends 352") }
        self.init(encoding: encoding, sampleRate: rate, channelCount: channels, bitsPerSample: bits, framesPerPacket: frames,
                  payloadType: media.format, sessionName: session)
        if numbers.count == 11 {
            // Each field within the width the cookie gives it, so the cookie says what was sent.
            let widths = [32, 8, 8, 8, 8, 8, 8, 16, 32, 32, 32]
            guard zip(numbers, widths).allSatisfy({ $0 >= 0 && $0 < 1 << $1 }) else { throw bad("fmtp \"\(fmtp[media.format]!.prefix(64))\" has a parameter out of range") }
            alacParameters = numbers
        }
    }

    /// What an ALAC decoder is configured from (Apple's `ALACSpecificConfig` inside its `alac`
    /// atom, as libavcodec takes it: 36 bytes, big-endian): the announced fmtp parameters, or
    /// the usual ones for this stream's rate, channels and packet size when none were given.
    public var alacMagicCookie: [UInt8] {
        let p = alacParameters.count == 11 ? alacParameters
            : [framesPerPacket, 0, bitsPerSample, 40, 10, 14, channelCount, 255, 0, 0, sampleRate]
        var cookie: [UInt8] = []
        func put(_ value: Int, bytes: Int) {
            for shift in stride(from: 8 * (bytes - 1), through: 0, by: -8) { cookie.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        put(36, bytes: 4)
        cookie += Array("alac".utf8)
        put(0, bytes: 4)
        put(p[0], bytes: 4)
        for index in 1...6 { put(p[index], bytes: 1) }
        put(p[7], bytes: 2)
        put(p[8], bytes: 4)
        put(p[9], bytes: 4)
        put(p[10], bytes: 4)
        return cookie
    }
}
