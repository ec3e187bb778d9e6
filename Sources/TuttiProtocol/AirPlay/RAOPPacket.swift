/// The datagrams of AirPlay 1 (RAOP) audio, as senders and receivers exchange them: audio
/// packets on the receiver's server port, sync packets and resends on its control port, and
/// NTP-style timing on the timing ports. Every field is big-endian.
///
/// Parsing never trusts the bytes: a datagram too short for its type, or of an unknown type,
/// is `nil` (the receiver counts it and drops it).
public enum RAOPPacket: Sendable, Equatable {
    /// Audio: RTP sequence number, RTP timestamp (its first frame), the sender's SSRC and the
    /// encoded frames. `resent` when it came back after a resend request.
    case audio(RAOPAudioPacket)
    /// The sender's sync: `rtpTime` (the frame being played at `ntpTime` on the sender's clock,
    /// with the latency) and `rtpTimeWithoutLatency` (the frame it sends then).
    case sync(RAOPSync)
    /// A reply to our timing request: our send time echoed, the sender's receive and send times.
    case timingReply(RAOPTimingReply)
    /// A timing request, from a receiver to a sender's timing port.
    case timingRequest(sendTime: NTPTimestamp)
    /// A request for `count` packets from `sequence` on.
    case resendRequest(sequence: UInt16, count: UInt16)

    public static let audioPayloadType: UInt8 = 0x60
    public static let syncType: UInt8 = 0x54
    public static let timingRequestType: UInt8 = 0x52
    public static let timingReplyType: UInt8 = 0x53
    public static let resendRequestType: UInt8 = 0x55
    public static let resentAudioType: UInt8 = 0x56

    /// Reads one datagram; nil if it is none of these.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count >= 4, bytes[0] & 0xC0 == 0x80 else { return nil }
        let type = bytes[1] & 0x7F
        switch type {
        case Self.audioPayloadType:
            guard let packet = RAOPAudioPacket(rtp: bytes[...], resent: false) else { return nil }
            self = .audio(packet)
        case Self.resentAudioType:
            // 4 bytes of its own, then the original packet.
            guard bytes.count >= 4 + 12, let packet = RAOPAudioPacket(rtp: bytes[4...], resent: true) else { return nil }
            self = .audio(packet)
        case Self.syncType:
            guard bytes.count >= 20 else { return nil }
            self = .sync(RAOPSync(rtpTimeWithoutLatency: bytes.be32(4), ntpTime: NTPTimestamp(bytes.be64(8)), rtpTime: bytes.be32(16),
                                  isFirst: bytes[0] & 0x10 != 0))
        case Self.timingReplyType:
            guard bytes.count >= 32 else { return nil }
            self = .timingReply(RAOPTimingReply(originate: NTPTimestamp(bytes.be64(8)), receive: NTPTimestamp(bytes.be64(16)),
                                                transmit: NTPTimestamp(bytes.be64(24))))
        case Self.timingRequestType:
            guard bytes.count >= 32 else { return nil }
            self = .timingRequest(sendTime: NTPTimestamp(bytes.be64(24)))
        case Self.resendRequestType:
            guard bytes.count >= 8 else { return nil }
            self = .resendRequest(sequence: UInt16(bytes.be16(4)), count: UInt16(bytes.be16(6)))
        default:
            return nil
        }
    }

    /// The datagram's bytes.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        switch self {
        case .audio(let packet):
            if packet.resent { bytes = [0x80, 0x80 | Self.resentAudioType]; bytes.appendBE16(UInt32(packet.sequence)) }
            bytes += packet.rtpBytes
        case .sync(let sync):
            // Bytes 2–3: 4, as AirPlay senders write them. iTunes wrote 7, which makes
            // shairport-sync play 11 025 frames (0.25 s) later than the packet says (its
            // `fixedLatencyOffset`, for AirPort Express timing), so 7 would make a sender's
            // frames late by that much on it.
            bytes = [sync.isFirst ? 0x90 : 0x80, 0x80 | Self.syncType, 0x00, 0x04]
            bytes.appendBE32(sync.rtpTimeWithoutLatency)
            bytes.appendBE64(sync.ntpTime.rawValue)
            bytes.appendBE32(sync.rtpTime)
        case .timingReply(let reply):
            bytes = [0x80, 0x80 | Self.timingReplyType, 0x00, 0x07, 0, 0, 0, 0]
            bytes.appendBE64(reply.originate.rawValue)
            bytes.appendBE64(reply.receive.rawValue)
            bytes.appendBE64(reply.transmit.rawValue)
        case .timingRequest(let sendTime):
            bytes = [0x80, 0x80 | Self.timingRequestType, 0x00, 0x07, 0, 0, 0, 0]
            bytes.appendBE64(0)
            bytes.appendBE64(0)
            bytes.appendBE64(sendTime.rawValue)
        case .resendRequest(let sequence, let count):
            bytes = [0x80, 0x80 | Self.resendRequestType, 0x00, 0x01]
            bytes.appendBE16(UInt32(sequence))
            bytes.appendBE16(UInt32(count))
        }
        return bytes
    }
}

public struct RAOPAudioPacket: Sendable, Equatable {
    public var sequence: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var marker: Bool
    public var payload: [UInt8]
    public var resent: Bool

    public init(sequence: UInt16, timestamp: UInt32, ssrc: UInt32, marker: Bool = false, payload: [UInt8], resent: Bool = false) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.marker = marker
        self.payload = payload
        self.resent = resent
    }

    /// An RTP packet: 12 bytes of header (no CSRC, no extension taken), then the payload.
    init?(rtp bytes: ArraySlice<UInt8>, resent: Bool) {
        let start = bytes.startIndex
        guard bytes.count >= 12, bytes[start] & 0xC0 == 0x80, bytes[start] & 0x1F == 0, bytes[start + 1] & 0x7F == RAOPPacket.audioPayloadType else { return nil }
        // Padding (RFC 3550 5.1): the last byte counts the padding bytes, itself included.
        var end = bytes.endIndex
        if bytes[start] & 0x20 != 0 {
            guard let padding = bytes.last, padding > 0, Int(padding) <= bytes.count - 12 else { return nil }
            end -= Int(padding)
        }
        let array = Array(bytes[start..<(start + 12)])
        self.init(sequence: UInt16(array.be16(2)), timestamp: array.be32(4), ssrc: array.be32(8), marker: bytes[start + 1] & 0x80 != 0,
                  payload: Array(bytes[(start + 12)..<end]), resent: resent)
    }

    var rtpBytes: [UInt8] {
        var bytes: [UInt8] = [0x80, (marker ? 0x80 : 0) | RAOPPacket.audioPayloadType]
        bytes.appendBE16(UInt32(sequence))
        bytes.appendBE32(timestamp)
        bytes.appendBE32(ssrc)
        return bytes + payload
    }
}

public struct RAOPSync: Sendable, Equatable {
    public var rtpTimeWithoutLatency: UInt32
    public var ntpTime: NTPTimestamp
    public var rtpTime: UInt32
    public var isFirst: Bool

    public init(rtpTimeWithoutLatency: UInt32, ntpTime: NTPTimestamp, rtpTime: UInt32, isFirst: Bool = false) {
        self.rtpTimeWithoutLatency = rtpTimeWithoutLatency
        self.ntpTime = ntpTime
        self.rtpTime = rtpTime
        self.isFirst = isFirst
    }

    /// Frames between what the sender sends and what it plays: the latency it asks for.
    public var latencyFrames: UInt32 { rtpTime &- rtpTimeWithoutLatency }
}

public struct RAOPTimingReply: Sendable, Equatable {
    public var originate: NTPTimestamp
    public var receive: NTPTimestamp
    public var transmit: NTPTimestamp

    public init(originate: NTPTimestamp, receive: NTPTimestamp, transmit: NTPTimestamp) {
        self.originate = originate
        self.receive = receive
        self.transmit = transmit
    }
}

/// A 64-bit NTP time stamp: seconds since 1900 in the high 32 bits, the fraction in the low.
public struct NTPTimestamp: Sendable, Equatable, Hashable {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    /// From nanoseconds on some clock (the house's monotonic clock, read as if it were NTP's:
    /// only differences between stamps of one clock matter).
    public init(nanoseconds: Int64) {
        let value = UInt64(bitPattern: nanoseconds)
        let seconds = value / 1_000_000_000
        let fraction = ((value % 1_000_000_000) << 32) / 1_000_000_000
        rawValue = (seconds << 32) | fraction
    }

    /// Nanoseconds since the stamp's epoch, rounded to the nearest: exact to the nanosecond
    /// (a fraction unit is 0.23 ns).
    public var nanoseconds: Int64 {
        let seconds = Int64(rawValue >> 32)
        let fraction = rawValue & 0xFFFF_FFFF
        return seconds * 1_000_000_000 + Int64((fraction * 1_000_000_000 + (1 << 31)) >> 32)
    }
}

extension Array where Element == UInt8 {
    func be16(_ offset: Int) -> UInt32 { UInt32(self[offset]) << 8 | UInt32(self[offset + 1]) }
    func be32(_ offset: Int) -> UInt32 { be16(offset) << 16 | be16(offset + 2) }
    func be64(_ offset: Int) -> UInt64 { UInt64(be32(offset)) << 32 | UInt64(be32(offset + 4)) }
    mutating func appendBE16(_ value: UInt32) { append(UInt8(truncatingIfNeeded: value >> 8)); append(UInt8(truncatingIfNeeded: value)) }
    mutating func appendBE32(_ value: UInt32) { appendBE16(value >> 16); appendBE16(value & 0xFFFF) }
    mutating func appendBE64(_ value: UInt64) { appendBE32(UInt32(value >> 32)); appendBE32(UInt32(value & 0xFFFF_FFFF)) }
}
