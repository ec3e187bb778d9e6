import FoundationEssentials
import NIOCore

/// A message of Snapcast's binary stream protocol (snapclient ↔ snapserver, port 1704;
/// protocol version 2, as snapcast 0.26 speaks it). docs/SNAPCAST.md has the layout.
///
/// Every message is a 26-byte little-endian header — type, id, refersTo (u16 each), the
/// sender's send and receive times (i32 seconds, i32 microseconds each), the payload size
/// (u32) — and a payload by type.
public struct SnapcastMessage: Sendable, Equatable {
    public enum Kind: UInt16, Sendable {
        case codecHeader = 1
        case wireChunk = 2
        case serverSettings = 3
        case time = 4
        case hello = 5
        case streamTags = 6
        case clientInfo = 7
    }

    /// Seconds and microseconds, the protocol's time stamp.
    public struct Time: Sendable, Equatable {
        public var seconds: Int32
        public var microseconds: Int32

        public init(seconds: Int32, microseconds: Int32) {
            self.seconds = seconds
            self.microseconds = microseconds
        }

        /// A time in nanoseconds, floored to the microsecond.
        public init(nanoseconds: Int64) {
            let micros = nanoseconds >= 0 ? nanoseconds / 1000 : (nanoseconds - 999) / 1000
            let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
            self.init(seconds: Int32(truncatingIfNeeded: seconds), microseconds: Int32(micros - seconds * 1_000_000))
        }

        public var nanoseconds: Int64 { (Int64(seconds) * 1_000_000 + Int64(microseconds)) * 1000 }
    }

    public enum Payload: Sendable, Equatable {
        /// The codec's name ("pcm", "flac", "ogg", "opus") and its header.
        case codecHeader(codec: String, header: [UInt8])
        /// Encoded audio whose first frame is heard at `timestamp` + the client's buffer.
        case wireChunk(timestamp: Time, data: [UInt8])
        case serverSettings(SnapcastServerSettings)
        /// A client's clock probe, or the server's answer (its receive time less the client's send time).
        case time(latency: Time)
        case hello(SnapcastHello)
        /// A client's own volume change.
        case clientInfo(volume: Int, muted: Bool)
        /// A type this side does not use (stream tags), kept as bytes.
        case other(kind: UInt16, bytes: [UInt8])
    }

    public var id: UInt16
    public var refersTo: UInt16
    public var sent: Time
    public var received: Time
    public var payload: Payload

    public init(id: UInt16 = 0, refersTo: UInt16 = 0, sent: Time = Time(seconds: 0, microseconds: 0),
                received: Time = Time(seconds: 0, microseconds: 0), payload: Payload) {
        self.id = id
        self.refersTo = refersTo
        self.sent = sent
        self.received = received
        self.payload = payload
    }

    public static let headerSize = 26
    /// The largest payload a 0.26 client accepts; also what this side accepts.
    public static let maximumPayloadSize = 1_000_000

    public var kind: UInt16 {
        switch payload {
        case .codecHeader: Kind.codecHeader.rawValue
        case .wireChunk: Kind.wireChunk.rawValue
        case .serverSettings: Kind.serverSettings.rawValue
        case .time: Kind.time.rawValue
        case .hello: Kind.hello.rawValue
        case .clientInfo: Kind.clientInfo.rawValue
        case .other(let kind, _): kind
        }
    }
}

/// What a snapclient says about itself when it connects.
public struct SnapcastHello: Sendable, Equatable, Codable {
    public var arch: String?
    public var clientName: String?
    public var hostName: String?
    public var id: String?
    public var instance: Int?
    public var mac: String?
    public var os: String?
    public var protocolVersion: Int?
    public var version: String?

    public init(hostName: String, id: String, instance: Int = 1, mac: String = "00:00:00:00:00:00") {
        self.hostName = hostName
        self.id = id
        self.instance = instance
        self.mac = mac
        clientName = "Snapclient"
        protocolVersion = 2
    }

    enum CodingKeys: String, CodingKey {
        case arch = "Arch", clientName = "ClientName", hostName = "HostName", id = "ID", instance = "Instance", mac = "MAC", os = "OS"
        case protocolVersion = "SnapStreamProtocolVersion", version = "Version"
    }

    /// The room it plays: its host id when one was given (`--hostID`, anything but its MAC),
    /// else its host name; a second instance on a host is `name#2`.
    public var roomName: String {
        let base = id.flatMap { $0.isEmpty || $0 == mac ? nil : $0 } ?? hostName.flatMap { $0.isEmpty ? nil : $0 } ?? "snapclient"
        let instance = instance ?? 1
        return instance > 1 ? "\(base)#\(instance)" : base
    }
}

/// What the server tells a client to do: how far ahead of its time stamps it plays, its extra
/// latency and its volume.
public struct SnapcastServerSettings: Sendable, Equatable, Codable {
    public var bufferMs: Int
    public var latency: Int
    public var muted: Bool
    public var volume: Int

    public init(bufferMs: Int, latency: Int = 0, muted: Bool = false, volume: Int = 100) {
        self.bufferMs = bufferMs
        self.latency = latency
        self.muted = muted
        self.volume = volume
    }
}

/// A malformed message, in one line naming what is wrong.
public struct SnapcastMessageError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension SnapcastMessage {
    /// Reads one message from `buffer` if a whole one is there (nil otherwise, consuming
    /// nothing). Throws on a header or payload that cannot be one of the protocol's.
    public static func read(from buffer: inout ByteBuffer) throws(SnapcastMessageError) -> SnapcastMessage? {
        guard buffer.readableBytes >= headerSize else { return nil }
        let start = buffer.readerIndex
        guard let kind = buffer.getInteger(at: start, endianness: .little, as: UInt16.self),
              let id = buffer.getInteger(at: start + 2, endianness: .little, as: UInt16.self),
              let refersTo = buffer.getInteger(at: start + 4, endianness: .little, as: UInt16.self),
              let sentSeconds = buffer.getInteger(at: start + 6, endianness: .little, as: Int32.self),
              let sentMicros = buffer.getInteger(at: start + 10, endianness: .little, as: Int32.self),
              let receivedSeconds = buffer.getInteger(at: start + 14, endianness: .little, as: Int32.self),
              let receivedMicros = buffer.getInteger(at: start + 18, endianness: .little, as: Int32.self),
              let size = buffer.getInteger(at: start + 22, endianness: .little, as: UInt32.self) else { return nil }
        guard (1...7).contains(kind) else { throw SnapcastMessageError("unknown message type \(kind)") }
        guard size <= maximumPayloadSize else { throw SnapcastMessageError("a message of type \(kind) of \(size) bytes, over the \(maximumPayloadSize) allowed") }
        guard buffer.readableBytes >= headerSize + Int(size) else { return nil }
        buffer.moveReaderIndex(forwardBy: headerSize)
        var body = buffer.readSlice(length: Int(size))!
        let payload = try Self.payload(kind: kind, body: &body)
        return SnapcastMessage(id: id, refersTo: refersTo, sent: Time(seconds: sentSeconds, microseconds: sentMicros),
                               received: Time(seconds: receivedSeconds, microseconds: receivedMicros), payload: payload)
    }

    private static func payload(kind: UInt16, body: inout ByteBuffer) throws(SnapcastMessageError) -> Payload {
        func sized(_ what: String) throws(SnapcastMessageError) -> [UInt8] {
            guard let length = body.readInteger(endianness: .little, as: UInt32.self), let bytes = body.readBytes(length: Int(length)) else {
                throw SnapcastMessageError("\(what) is cut short")
            }
            return bytes
        }
        func json<T: Decodable>(_ type: T.Type, _ what: String) throws(SnapcastMessageError) -> T {
            let bytes = try sized(what)
            do { return try JSONDecoder().decode(T.self, from: Data(bytes)) } catch {
                throw SnapcastMessageError("\(what) is not the JSON expected: \(String(decoding: bytes.prefix(80), as: UTF8.self))")
            }
        }
        switch Kind(rawValue: kind)! {
        case .codecHeader:
            let codec = try sized("the codec header's name")
            return .codecHeader(codec: String(decoding: codec, as: UTF8.self), header: try sized("the codec header"))
        case .wireChunk:
            guard let seconds = body.readInteger(endianness: .little, as: Int32.self), let micros = body.readInteger(endianness: .little, as: Int32.self) else {
                throw SnapcastMessageError("a wire chunk's time stamp is cut short")
            }
            return .wireChunk(timestamp: Time(seconds: seconds, microseconds: micros), data: try sized("a wire chunk"))
        case .serverSettings:
            return .serverSettings(try json(SnapcastServerSettings.self, "the server settings"))
        case .time:
            guard let seconds = body.readInteger(endianness: .little, as: Int32.self), let micros = body.readInteger(endianness: .little, as: Int32.self) else {
                throw SnapcastMessageError("a time message is cut short")
            }
            return .time(latency: Time(seconds: seconds, microseconds: micros))
        case .hello:
            return .hello(try json(SnapcastHello.self, "the hello"))
        case .clientInfo:
            struct Info: Decodable { var volume: Int?; var muted: Bool? }
            let info = try json(Info.self, "the client info")
            return .clientInfo(volume: info.volume ?? 100, muted: info.muted ?? false)
        case .streamTags:
            return .other(kind: kind, bytes: body.readBytes(length: body.readableBytes) ?? [])
        }
    }

    /// Appends the message to `buffer`.
    public func write(to buffer: inout ByteBuffer) {
        var body = ByteBufferAllocator().buffer(capacity: 64)
        func sized(_ bytes: some Collection<UInt8>) {
            body.writeInteger(UInt32(bytes.count), endianness: .little)
            body.writeBytes(bytes)
        }
        func json(_ value: some Encodable) {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            sized([UInt8]((try? encoder.encode(value)) ?? Data("{}".utf8)))
        }
        switch payload {
        case .codecHeader(let codec, let header):
            sized(Array(codec.utf8))
            sized(header)
        case .wireChunk(let timestamp, let data):
            body.writeInteger(timestamp.seconds, endianness: .little)
            body.writeInteger(timestamp.microseconds, endianness: .little)
            sized(data)
        case .serverSettings(let settings):
            json(settings)
        case .time(let latency):
            body.writeInteger(latency.seconds, endianness: .little)
            body.writeInteger(latency.microseconds, endianness: .little)
        case .hello(let hello):
            json(hello)
        case .clientInfo(let volume, let muted):
            struct Info: Encodable { var volume: Int; var muted: Bool }
            json(Info(volume: volume, muted: muted))
        case .other(_, let bytes):
            body.writeBytes(bytes)
        }
        buffer.writeInteger(kind, endianness: .little)
        buffer.writeInteger(id, endianness: .little)
        buffer.writeInteger(refersTo, endianness: .little)
        buffer.writeInteger(sent.seconds, endianness: .little)
        buffer.writeInteger(sent.microseconds, endianness: .little)
        buffer.writeInteger(received.seconds, endianness: .little)
        buffer.writeInteger(received.microseconds, endianness: .little)
        buffer.writeInteger(UInt32(body.readableBytes), endianness: .little)
        buffer.writeBuffer(&body)
    }

    /// The codec header of 16-bit PCM: a 44-byte RIFF/WAVE header, as snapserver sends it.
    public static func pcmHeader(sampleRate: Int, channelCount: Int, bits: Int = 16) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 44)
        buffer.writeString("RIFF")
        buffer.writeInteger(UInt32(36), endianness: .little)
        buffer.writeString("WAVEfmt ")
        buffer.writeInteger(UInt32(16), endianness: .little)
        buffer.writeInteger(UInt16(1), endianness: .little)
        buffer.writeInteger(UInt16(channelCount), endianness: .little)
        buffer.writeInteger(UInt32(sampleRate), endianness: .little)
        buffer.writeInteger(UInt32(sampleRate * bits * channelCount / 8), endianness: .little)
        buffer.writeInteger(UInt16(channelCount * ((bits + 7) / 8)), endianness: .little)
        buffer.writeInteger(UInt16(bits), endianness: .little)
        buffer.writeString("data")
        buffer.writeInteger(UInt32(0), endianness: .little)
        return Array(buffer.readableBytesView)
    }
}
