/// The UDP clock-sync exchange, NTP-style: the speaker sends `clientSend` (t1, its clock); the
/// server stamps `serverReceive` (t2) on arrival and `serverSend` (t3) just before replying; the
/// speaker notes the arrival (t4, its clock). Requests and replies have the same size, so the
/// server can never be used to amplify traffic.
public struct ClockSyncPacket: Sendable, Equatable {
    public static let magic: UInt32 = 0x5454_434B  // "TTCK"
    public static let size = 34

    public var isReply: Bool
    public var sequence: UInt32
    public var clientSend: Int64
    public var serverReceive: Int64
    public var serverSend: Int64

    public init(isReply: Bool, sequence: UInt32, clientSend: Int64, serverReceive: Int64 = 0, serverSend: Int64 = 0) {
        self.isReply = isReply
        self.sequence = sequence
        self.clientSend = clientSend
        self.serverReceive = serverReceive
        self.serverSend = serverSend
    }

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
                  serverReceive: decoded.serverReceive, serverSend: decoded.serverSend)
    }

    private static func fields(_ raw: UnsafeRawBufferPointer)
        -> (magic: UInt32, version: UInt8, kind: UInt8, sequence: UInt32, clientSend: Int64, serverReceive: Int64, serverSend: Int64) {
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T { T(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        return (get(0, UInt32.self), raw[4], raw[5], get(6, UInt32.self), get(10, Int64.self), get(18, Int64.self), get(26, Int64.self))
    }
}
