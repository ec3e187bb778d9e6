import NIOCore

/// Why a peer's bytes were refused. One line, naming the problem; the connection that sent them
/// is closed, nothing else.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Message type codes on the wire. Never reuse a retired code.
enum WireType: UInt8 {
    case hello = 1, welcome = 2, streamStart = 3, audioChunk = 4, anchor = 5, flush = 6, streamEnd = 7,
         volume = 8, speakerStatus = 9, controlRequest = 10, controlResponse = 11, goodbye = 12,
         roomSettings = 13, authenticate = 14, admission = 15
}

extension WireMessage {
    var wireType: WireType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .streamStart: .streamStart
        case .audioChunk: .audioChunk
        case .anchor: .anchor
        case .flush: .flush
        case .streamEnd: .streamEnd
        case .volume: .volume
        case .speakerStatus: .speakerStatus
        case .controlRequest: .controlRequest
        case .controlResponse: .controlResponse
        case .goodbye: .goodbye
        case .roomSettings: .roomSettings
        case .authenticate: .authenticate
        case .admission: .admission
        }
    }

    /// The message's name, for error lines.
    public var kindName: String { "\(wireType)" }

    /// Appends the whole frame (header and payload) to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(WireProtocol.magic)
        buffer.writeInteger(UInt8(WireProtocol.version))
        buffer.writeInteger(wireType.rawValue)
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        let start = buffer.writerIndex
        encodePayload(into: &buffer)
        buffer.setInteger(UInt32(buffer.writerIndex - start), at: lengthIndex)
    }

    private func encodePayload(into b: inout ByteBuffer) {
        switch self {
        case .hello(let m):
            b.writeInteger(m.role.rawValue)
            b.writeInteger(m.protocolVersion)
            b.writeWireString(m.name)
            b.writeInteger(UInt16(m.codecs.count))
            for codec in m.codecs { b.writeWireString(codec) }
            b.writeInteger(m.latencyNanoseconds)
            b.writeInteger(m.outputLeadNanoseconds)
            b.writeInteger(UInt8(m.resume == nil ? 0 : 1))
            if let resume = m.resume {
                b.writeInteger(resume.streamID)
                b.writeInteger(resume.epoch)
                let held = resume.held.prefix(Resume.maximumRanges)
                b.writeInteger(UInt8(held.count))
                for range in held {
                    b.writeInteger(range.lowerBound)
                    b.writeInteger(range.upperBound)
                }
            }
        case .welcome(let m):
            b.writeInteger(m.protocolVersion)
            b.writeWireString(m.serverName)
            b.writeInteger(m.clientID)
            b.writeWireBytes(m.challenge)
        case .authenticate(let proof):
            b.writeWireBytes(proof)
        case .streamStart(let m):
            b.writeInteger(m.streamID)
            b.writeWireString(m.codec)
            b.writeInteger(m.sampleRate)
            b.writeInteger(m.channelCount)
            b.writeWireBytes(m.codecHeader)
            b.writeInteger(m.epoch)
        case .audioChunk(let m):
            b.writeInteger(m.streamID)
            b.writeInteger(m.firstFrame)
            b.writeInteger(m.frameCount)
            b.writeWireBytes(m.payload)
        case .anchor(let m):
            b.writeInteger(m.streamID)
            b.writeInteger(m.timelineFrame)
            b.writeInteger(m.serverTime)
            b.writeInteger(UInt8(m.isPlaying ? 1 : 0))
        case .flush(let m):
            b.writeInteger(m.streamID)
            b.writeInteger(m.fromFrame)
            b.writeInteger(m.epoch)
        case .streamEnd(let m):
            b.writeInteger(m.streamID)
            b.writeInteger(m.endFrame)
        case .volume(let m):
            b.writeInteger(m.level.bitPattern)
            b.writeInteger(m.rampNanoseconds)
        case .speakerStatus(let m):
            b.writeInteger(m.state.rawValue)
            b.writeInteger(m.streamID)
            b.writeInteger(m.playheadFrame)
            b.writeInteger(m.bufferedUntilFrame)
            b.writeInteger(m.syncErrorNanoseconds)
            b.writeInteger(m.clockErrorNanoseconds)
            b.writeInteger(m.underruns)
            b.writeInteger(m.fillRate.bitPattern)
            b.writeWireString(m.problem)
        case .controlRequest(let m):
            b.writeInteger(m.requestID)
            b.writeWireLongString(m.json)
        case .controlResponse(let m):
            b.writeInteger(m.requestID)
            b.writeInteger(UInt8(m.ok ? 1 : 0))
            b.writeWireLongString(m.json)
        case .goodbye(let reason):
            b.writeWireString(reason)
        case .roomSettings(let m):
            b.writeWireString(m.name)
            b.writeInteger(m.latencyNanoseconds)
            b.writeInteger(m.channelMode.wireCode)
        case .admission(let m):
            b.writeInteger(UInt8(m.isAdmitted ? 1 : 0))
            b.writeWireString(m.code)
        }
    }

    /// Decodes one frame from the front of `buffer`. Returns nil (consuming nothing) when the
    /// frame is not complete yet; throws for anything malformed.
    public static func decode(from buffer: inout ByteBuffer, maximumPayload: Int = WireProtocol.defaultMaximumPayload) throws(WireError) -> WireMessage? {
        guard buffer.readableBytes >= WireProtocol.headerSize else { return nil }
        let start = buffer.readerIndex
        let magic: UInt16 = buffer.getInteger(at: start)!
        guard magic == WireProtocol.magic else {
            throw WireError("not a Tutti stream (bad magic 0x\(String(magic, radix: 16)))")
        }
        let version: UInt8 = buffer.getInteger(at: start + 2)!
        guard version == UInt8(WireProtocol.version) else {
            throw WireError("protocol version \(version) not supported (this build speaks \(WireProtocol.version))")
        }
        let typeCode: UInt8 = buffer.getInteger(at: start + 3)!
        let length = Int(buffer.getInteger(at: start + 4, as: UInt32.self)!)
        guard length <= maximumPayload else {
            throw WireError("message of \(length) bytes exceeds the limit of \(maximumPayload)")
        }
        guard let type = WireType(rawValue: typeCode) else { throw WireError("unknown message type \(typeCode)") }
        guard buffer.readableBytes >= WireProtocol.headerSize + length else { return nil }
        buffer.moveReaderIndex(forwardBy: WireProtocol.headerSize)
        var payload = buffer.readSlice(length: length)!
        let message = try decodePayload(type, &payload)
        guard payload.readableBytes == 0 else {
            throw WireError("\(type) message has \(payload.readableBytes) unexpected trailing bytes")
        }
        return message
    }

    private static func decodePayload(_ type: WireType, _ p: inout ByteBuffer) throws(WireError) -> WireMessage {
        var reader = WireReader(buffer: p, type: type)
        defer { p = reader.buffer }
        switch type {
        case .hello:
            let roleCode: UInt8 = try reader.integer()
            guard let role = Hello.Role(rawValue: roleCode) else { throw WireError("hello: unknown role \(roleCode)") }
            let version: UInt16 = try reader.integer()
            let name = try reader.string()
            let count: UInt16 = try reader.integer()
            var codecs: [String] = []
            for _ in 0..<count { codecs.append(try reader.string()) }
            let latency: Int64 = try reader.integer()
            let outputLead: Int64 = try reader.integer()
            // The house adds these to its clock: out of range, they would overflow it.
            for (what, value) in [("latency", latency), ("output lead", outputLead)] where !(0...Hello.maximumDelayNanoseconds).contains(value) {
                throw WireError("hello: \(what) \(value) ns is outside 0…\(Hello.maximumDelayNanoseconds / 1_000_000_000) s")
            }
            var resume: Resume?
            if try reader.flag() {
                let streamID: UInt32 = try reader.integer()
                let epoch: UInt32 = try reader.integer()
                let ranges: UInt8 = try reader.integer()
                guard ranges <= Resume.maximumRanges else { throw WireError("hello: \(ranges) held ranges, more than \(Resume.maximumRanges)") }
                var held: [Range<Int64>] = []
                for _ in 0..<ranges {
                    let first: Int64 = try reader.integer()
                    let end: Int64 = try reader.integer()
                    guard first < end, held.last.map({ $0.upperBound <= first }) ?? true else {
                        throw WireError("hello: held range \(first)..<\(end) is empty or out of order")
                    }
                    held.append(first..<end)
                }
                resume = Resume(streamID: streamID, epoch: epoch, held: held)
            }
            return .hello(Hello(role: role, protocolVersion: version, name: name, codecs: codecs, latencyNanoseconds: latency, outputLeadNanoseconds: outputLead, resume: resume))
        case .welcome:
            var welcome = Welcome(protocolVersion: try reader.integer(), serverName: try reader.string(), clientID: try reader.integer())
            welcome.challenge = try reader.bytes()
            guard welcome.challenge.count <= 64 else { throw WireError("welcome: a challenge of \(welcome.challenge.count) bytes (at most 64)") }
            return .welcome(welcome)
        case .authenticate:
            let proof = try reader.bytes()
            guard proof.count <= 64 else { throw WireError("authenticate: a proof of \(proof.count) bytes (at most 64)") }
            return .authenticate(proof: proof)
        case .streamStart:
            let id: UInt32 = try reader.integer()
            let codec = try reader.string()
            let rate: UInt32 = try reader.integer()
            let channels: UInt8 = try reader.integer()
            guard rate > 0, rate <= 768_000, channels > 0 else { throw WireError("streamStart: invalid format \(rate) Hz × \(channels)") }
            let header = try reader.bytes()
            return .streamStart(StreamStart(streamID: id, codec: codec, sampleRate: rate, channelCount: channels, codecHeader: header, epoch: try reader.integer()))
        case .audioChunk:
            let id: UInt32 = try reader.integer()
            let first: Int64 = try reader.integer()
            let count: UInt32 = try reader.integer()
            return .audioChunk(AudioChunk(streamID: id, firstFrame: first, frameCount: count, payload: try reader.bytes()))
        case .anchor:
            let id: UInt32 = try reader.integer()
            let frame: Int64 = try reader.integer()
            let time: Int64 = try reader.integer()
            return .anchor(Anchor(streamID: id, timelineFrame: frame, serverTime: time, isPlaying: try reader.flag()))
        case .flush:
            return .flush(Flush(streamID: try reader.integer(), fromFrame: try reader.integer(), epoch: try reader.integer()))
        case .streamEnd:
            return .streamEnd(StreamEnd(streamID: try reader.integer(), endFrame: try reader.integer()))
        case .volume:
            let bits: UInt32 = try reader.integer()
            let level = Float(bitPattern: bits)
            guard level.isFinite, level >= 0, level <= 4 else { throw WireError("volume: invalid level \(level)") }
            return .volume(Volume(level: level, rampNanoseconds: try reader.integer()))
        case .speakerStatus:
            let code: UInt8 = try reader.integer()
            guard let state = SpeakerStatus.State(rawValue: code) else { throw WireError("speakerStatus: unknown state \(code)") }
            var status = SpeakerStatus(state: state, streamID: try reader.integer(), playheadFrame: try reader.integer(),
                                       bufferedUntilFrame: try reader.integer(), syncErrorNanoseconds: try reader.integer(),
                                       clockErrorNanoseconds: try reader.integer(), underruns: try reader.integer())
            status.fillRate = Float(bitPattern: try reader.integer())
            // The house reports it as JSON, which has no infinity: a hostile room's would have
            // stopped the house at the next look at its rooms.
            guard status.fillRate.isFinite, status.fillRate >= 0 else { throw WireError("speakerStatus: invalid fill rate \(status.fillRate)") }
            status.problem = try reader.string()
            return .speakerStatus(status)
        case .controlRequest:
            return .controlRequest(ControlRequest(requestID: try reader.integer(), json: try reader.longString()))
        case .controlResponse:
            return .controlResponse(ControlResponse(requestID: try reader.integer(), ok: try reader.flag(), json: try reader.longString()))
        case .goodbye:
            return .goodbye(reason: try reader.string())
        case .roomSettings:
            let name = try reader.string()
            guard !name.isEmpty, name.utf8.count <= 64 else { throw WireError("roomSettings: a room name must be 1 to 64 bytes") }
            let latency: Int64 = try reader.integer()
            guard (0...RoomSettings.maximumLatencyNanoseconds).contains(latency) else { throw WireError("roomSettings: invalid latency \(latency) ns") }
            let code: UInt8 = try reader.integer()
            guard let mode = ChannelMode(wireCode: code) else { throw WireError("roomSettings: unknown channel mode \(code)") }
            return .roomSettings(RoomSettings(name: name, latencyNanoseconds: latency, channelMode: mode))
        case .admission:
            let admitted = try reader.flag()
            let code = try reader.string()
            guard code.utf8.count <= 16 else { throw WireError("admission: a code of \(code.utf8.count) bytes") }
            return .admission(Admission(isAdmitted: admitted, code: code))
        }
    }
}

/// Reads payload fields, turning every shortfall into a `WireError` that names the message.
struct WireReader {
    var buffer: ByteBuffer
    let type: WireType

    mutating func integer<T: FixedWidthInteger>() throws(WireError) -> T {
        guard let value: T = buffer.readInteger() else { throw WireError("\(type) message is truncated") }
        return value
    }

    mutating func flag() throws(WireError) -> Bool {
        let value: UInt8 = try integer()
        guard value <= 1 else { throw WireError("\(type) message has an invalid flag \(value)") }
        return value == 1
    }

    mutating func string() throws(WireError) -> String {
        let length: UInt16 = try integer()
        return try text(length: Int(length))
    }

    mutating func longString() throws(WireError) -> String {
        let length: UInt32 = try integer()
        return try text(length: Int(length))
    }

    private mutating func text(length: Int) throws(WireError) -> String {
        guard let bytes = buffer.readBytes(length: length) else { throw WireError("\(type) message is truncated") }
        guard let string = String(validating: bytes, as: UTF8.self) else { throw WireError("\(type) message has invalid UTF-8 text") }
        return string
    }

    mutating func bytes() throws(WireError) -> [UInt8] {
        let length: UInt32 = try integer()
        guard let bytes = buffer.readBytes(length: Int(length)) else { throw WireError("\(type) message is truncated") }
        return bytes
    }
}

extension ByteBuffer {
    mutating func writeWireString(_ string: String) {
        let utf8 = Array(string.utf8.prefix(Int(UInt16.max)))
        writeInteger(UInt16(utf8.count))
        writeBytes(utf8)
    }

    mutating func writeWireLongString(_ string: String) {
        writeInteger(UInt32(string.utf8.count))
        writeString(string)
    }

    mutating func writeWireBytes(_ bytes: [UInt8]) {
        writeInteger(UInt32(bytes.count))
        writeBytes(bytes)
    }
}

/// NIO decoder: bytes → `WireMessage`. A malformed frame raises `WireError` through the
/// pipeline; the connection's handler reports it in one line and closes that connection.
///
/// `openingFrames` frames from the start are held to `openingMaximumPayload`: on the house's
/// side, a peer's hello and its next message (a speaker's status, a controller's proof) are
/// small, so a stranger's connection, before it has proved anything, holds at most a few KiB of
/// the house's memory instead of a frame's full limit.
public struct WireMessageDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = WireMessage
    public let maximumPayload: Int
    public let openingMaximumPayload: Int
    private var openingFramesLeft: Int

    public init(maximumPayload: Int = WireProtocol.defaultMaximumPayload, openingFrames: Int = 0, openingMaximumPayload: Int = 4096) {
        self.maximumPayload = maximumPayload
        self.openingMaximumPayload = openingMaximumPayload
        openingFramesLeft = openingFrames
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let limit = openingFramesLeft > 0 ? openingMaximumPayload : maximumPayload
        guard let message = try WireMessage.decode(from: &buffer, maximumPayload: limit) else { return .needMoreData }
        if openingFramesLeft > 0 { openingFramesLeft -= 1 }
        context.fireChannelRead(Self.wrapInboundOut(message))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}

/// NIO encoder: `WireMessage` → bytes.
public struct WireMessageEncoder: MessageToByteEncoder, Sendable {
    public typealias OutboundIn = WireMessage
    public init() {}
    public func encode(data: WireMessage, out: inout ByteBuffer) throws {
        data.encode(into: &out)
    }
}
