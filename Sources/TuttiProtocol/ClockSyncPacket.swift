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
        let b = Array(bytes)
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            b[offset..<(offset + MemoryLayout<T>.size)].reduce(T.zero) { $0 << 8 | T($1) }
        }
        guard get(0, UInt32.self) == Self.magic else { throw WireError("not a Tutti clock-sync packet") }
        guard get(4, UInt8.self) == UInt8(WireProtocol.version) else { throw WireError("clock-sync version \(b[4]) not supported") }
        let kind = get(5, UInt8.self)
        guard kind == 1 || kind == 2 else { throw WireError("clock-sync packet of unknown kind \(kind)") }
        self.init(isReply: kind == 2, sequence: get(6, UInt32.self), clientSend: get(10, Int64.self),
                  serverReceive: get(18, Int64.self), serverSend: get(26, Int64.self))
    }
}
