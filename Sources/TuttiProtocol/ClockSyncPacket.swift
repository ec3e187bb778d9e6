import Crypto

/// The UDP clock-sync exchange, NTP-style: the speaker sends `clientSend` (t1, its clock); the
/// server stamps `serverReceive` (t2) on arrival and `serverSend` (t3) just before replying; the
/// speaker notes the arrival (t4, its clock). Requests and replies have the same size, so the
/// server can never be used to amplify traffic. A request's `serverSend`, otherwise unused,
/// names when the speaker asks to be answered (`AimedExchanges`), 0 for whenever.
///
/// Every packet names its connection's clock-sync session (`ClockSyncKey`, agreed in the secure
/// channel's handshake) and ends in a 16-byte tag (HMAC-SHA256 under the session's key): the
/// house answers only the speakers it admitted, and a speaker takes only replies the house
/// made, so a forged reply cannot move a room's clock.
public struct ClockSyncPacket: Sendable, Equatable {
    public static let magic: UInt32 = 0x5454_434B  // "TTCK"
    public static let size = 58
    /// The bytes the tag covers: all but the tag.
    static let authenticatedSize = 42
    static let tagSize = 16

    public var isReply: Bool
    public var sequence: UInt32
    public var clientSend: Int64
    public var serverReceive: Int64
    public var serverSend: Int64
    /// The clock-sync session (`ClockSyncKey.sessionID`) whose key tags the packet.
    public var sessionID: UInt64

    public init(isReply: Bool, sequence: UInt32, clientSend: Int64, serverReceive: Int64 = 0, serverSend: Int64 = 0, sessionID: UInt64 = 0) {
        self.sessionID = sessionID
        self.isReply = isReply
        self.sequence = sequence
        self.clientSend = clientSend
        self.serverReceive = serverReceive
        self.serverSend = serverSend
    }

    /// The packet, tagged with `key` (its session id taken from the key).
    public func encoded(key: ClockSyncKey) -> [UInt8] {
        var packet = self
        packet.sessionID = key.sessionID
        var bytes = packet.encoded()
        bytes.replaceSubrange(Self.authenticatedSize..., with: Self.tag(bytes[..<Self.authenticatedSize], key: key))
        return bytes
    }

    /// Whether `bytes`, a packet, carries the tag `key` makes (in constant time).
    public static func isAuthentic(_ bytes: some Collection<UInt8>, key: ClockSyncKey) -> Bool {
        guard bytes.count == size else { return false }
        let array = Array(bytes)
        let expected = tag(array[..<authenticatedSize], key: key)
        return zip(expected, array[authenticatedSize...]).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static func tag(_ bytes: ArraySlice<UInt8>, key: ClockSyncKey) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: bytes, using: key.key).prefix(tagSize))
    }

    /// The packet's fields with a zero tag: `encoded(key:)` is what goes on the wire.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.size)
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
        put(Self.magic)
        put(UInt8(WireProtocol.version))
        put(UInt8(isReply ? 2 : 1))
        put(sequence)
        put(clientSend)
        put(serverReceive)
        put(serverSend)
        put(sessionID)
        bytes.append(contentsOf: repeatElement(0, count: Self.tagSize))
        return bytes
    }

    public init(decoding bytes: some Collection<UInt8>) throws(WireError) {
        guard bytes.count == Self.size else { throw WireError("clock-sync packet of \(bytes.count) bytes (expected \(Self.size))") }
        // Read in place where the bytes are contiguous (a ByteBuffer's view is): a packet
        // arrives 20 times a second per room, and thousands a second in a simulated house.
        let decoded = bytes.withContiguousStorageIfAvailable { Self.fields(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { Self.fields($0) }
        guard decoded.magic == Self.magic else { throw WireError("not a Tutti clock-sync packet") }
        guard decoded.version == UInt8(WireProtocol.version) else { throw WireError("clock-sync version \(decoded.version) not supported") }
        guard decoded.kind == 1 || decoded.kind == 2 else { throw WireError("clock-sync packet of unknown kind \(decoded.kind)") }
        self.init(isReply: decoded.kind == 2, sequence: decoded.sequence, clientSend: decoded.clientSend,
                  serverReceive: decoded.serverReceive, serverSend: decoded.serverSend, sessionID: decoded.session)
    }

    private static func fields(_ raw: UnsafeRawBufferPointer)
        -> (magic: UInt32, version: UInt8, kind: UInt8, sequence: UInt32, clientSend: Int64, serverReceive: Int64, serverSend: Int64, session: UInt64) {
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T { T(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        return (get(0, UInt32.self), raw[4], raw[5], get(6, UInt32.self), get(10, Int64.self), get(18, Int64.self), get(26, Int64.self), get(34, UInt64.self))
    }
}
