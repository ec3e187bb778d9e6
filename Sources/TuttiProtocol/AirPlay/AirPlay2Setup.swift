import FoundationEssentials

/// AirPlay 2's SETUP bodies, binary property lists (docs/AIRPLAY.md). The first SETUP of a
/// session gives the sender's timing (`timingProtocol`, `timingPort`) and names it; a second,
/// with `streams`, sets up its audio. Read through `BinaryPropertyList`, never Foundation's
/// decoder (which traps on some malformed lists); keys not listed here are ignored.
public struct AirPlay2Setup: Sendable {
    public var timingProtocol: String?
    public var timingPort: Int?
    public var name: String?
    public var model: String?
    public var deviceID: String?
    public var streams: [Stream]?

    public struct Stream: Sendable {
        /// 96: realtime audio (RTP over UDP, as AirPlay 1); 103: buffered audio over TCP.
        public var type: Int
        /// Compression type: 1 PCM, 2 ALAC, 4 AAC, 8 AAC-ELD, 64 Opus.
        public var ct: Int?
        public var sr: Int?
        /// Frames per packet.
        public var spf: Int?
        /// One bit of AirPlay 2's format table.
        public var audioFormat: Int?
        /// The audio's ChaCha20-Poly1305 key.
        public var shk: [UInt8]?
        public var controlPort: Int?

        public init(type: Int, ct: Int? = nil, sr: Int? = nil, spf: Int? = nil, audioFormat: Int? = nil, shk: [UInt8]? = nil, controlPort: Int? = nil) {
            self.type = type
            self.ct = ct
            self.sr = sr
            self.spf = spf
            self.audioFormat = audioFormat
            self.shk = shk
            self.controlPort = controlPort
        }
    }

    public static let contentType = "application/x-apple-binary-plist"

    public struct Refusal: Error, Sendable {
        public var status: Int
        public var reason: String
        public var message: String
    }

    public init(body: [UInt8]) throws(Refusal) {
        func bad(_ message: String) -> Refusal { Refusal(status: 400, reason: "Bad Request", message: message) }
        guard body.count <= 64 * 1024 else { throw Refusal(status: 413, reason: "Request Entity Too Large", message: "a SETUP body of \(body.count) bytes") }
        let list: BinaryPropertyList
        do { list = try BinaryPropertyList(parsing: body) } catch {
            throw bad("the SETUP body is not a binary property list (\(error))")
        }
        guard case .dictionary = list else { throw bad("the SETUP body is not a dictionary") }
        /// An integer key within `range`, or nil when absent; another type or value is refused.
        func integer(_ value: BinaryPropertyList?, _ key: String, _ range: ClosedRange<Int64> = 0...Int64(UInt32.max)) throws(Refusal) -> Int? {
            guard let value else { return nil }
            guard let number = value.integer, range.contains(number) else { throw bad("\(key) is not an integer within \(range.lowerBound)…\(range.upperBound)") }
            return Int(number)
        }
        func string(_ value: BinaryPropertyList?, _ key: String) throws(Refusal) -> String? {
            guard let value else { return nil }
            guard let text = value.string else { throw bad("\(key) is not a string") }
            return String(text.prefix(256))
        }
        timingProtocol = try string(list["timingProtocol"], "timingProtocol")
        timingPort = try integer(list["timingPort"], "timingPort", 0...65535)
        name = try string(list["name"], "name")
        model = try string(list["model"], "model")
        deviceID = try string(list["deviceID"], "deviceID")
        if let value = list["streams"] {
            guard let items = value.array else { throw bad("streams is not an array") }
            var streams: [Stream] = []
            for item in items {
                guard case .dictionary = item else { throw bad("a stream is not a dictionary") }
                guard let type = try integer(item["type"], "type") else { throw bad("a stream without a type") }
                var shk: [UInt8]?
                if let key = item["shk"] {
                    guard let bytes = key.data else { throw bad("shk is not data") }
                    shk = bytes
                }
                streams.append(Stream(type: type, ct: try integer(item["ct"], "ct"), sr: try integer(item["sr"], "sr"), spf: try integer(item["spf"], "spf"),
                                      audioFormat: try integer(item["audioFormat"], "audioFormat", 0...Int64.max), shk: shk,
                                      controlPort: try integer(item["controlPort"], "controlPort", 0...65535)))
            }
            self.streams = streams
        }
    }

    /// The formats of AirPlay 2's table taken (the 16-bit stereo ones; PCM big-endian as
    /// AirPlay 1's L16): bit → encoding and rate.
    public static let formats: [Int: (encoding: RAOPAnnouncement.Encoding, sampleRate: Int)] = [
        1 << 11: (.l16, 44100), 1 << 13: (.l16, 48000), 1 << 18: (.appleLossless, 44100), 1 << 20: (.appleLossless, 48000),
    ]

    /// The stream's audio as an announcement (what AirPlay 1 says in ANNOUNCE's SDP).
    public static func announcement(for stream: Stream) throws(Refusal) -> RAOPAnnouncement {
        func unsupported(_ what: String) -> Refusal { Refusal(status: 415, reason: "Unsupported Media Type", message: what) }
        guard stream.type == 96 else {
            throw Refusal(status: 501, reason: "Not Implemented",
                          message: stream.type == 103 ? "buffered audio (stream type 103) needs PTP timing, which is not served; realtime audio (96) is"
                                                      : "stream type \(stream.type) is not audio this receiver takes")
        }
        let encoding: RAOPAnnouncement.Encoding
        var sampleRate = stream.sr ?? 44100
        if let bits = stream.audioFormat {
            guard let format = formats[bits] else { throw unsupported("audio format 0x\(String(bits, radix: 16)) is not 16-bit stereo PCM or ALAC") }
            encoding = format.encoding
            sampleRate = format.sampleRate
        } else {
            switch stream.ct {
            case 1: encoding = .l16
            case 2: encoding = .appleLossless
            case let other: throw unsupported("compression type \(other.map(String.init) ?? "none") is not PCM (1) or ALAC (2)")
            }
        }
        if let ct = stream.ct, ct != (encoding == .l16 ? 1 : 2) {
            throw unsupported("compression type \(ct) does not match audio format 0x\(String(stream.audioFormat ?? 0, radix: 16))")
        }
        let frames = stream.spf ?? 352
        guard (1...4096).contains(frames), [44100, 48000].contains(sampleRate) else {
            throw unsupported("\(frames) frames a packet at \(sampleRate) Hz")
        }
        return RAOPAnnouncement(encoding: encoding, sampleRate: sampleRate, channelCount: 2, bitsPerSample: 16, framesPerPacket: frames)
    }
}

/// Replies to AirPlay 2's SETUPs.
public struct AirPlay2SetupReply: Encodable, Sendable {
    public struct Stream: Encodable, Sendable {
        public var type: Int
        public var dataPort: Int
        public var controlPort: Int
        public init(type: Int, dataPort: Int, controlPort: Int) {
            self.type = type
            self.dataPort = dataPort
            self.controlPort = controlPort
        }
    }
    public var eventPort: Int?
    public var timingPort: Int?
    public var streams: [Stream]?

    public init(eventPort: Int? = nil, timingPort: Int? = nil, streams: [Stream]? = nil) {
        self.eventPort = eventPort
        self.timingPort = timingPort
        self.streams = streams
    }

    public var encoded: [UInt8] {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        // Encoding ints and arrays of them cannot fail.
        return Array(try! encoder.encode(self))
    }
}
