/// HomeKit's TLV8 (what pair-setup and pair-verify carry): items of a type byte, a length byte
/// and up to 255 value bytes; a longer value is split into consecutive items of one type, which
/// a reader joins again.
public struct TLV8: Sendable, Equatable {
    /// The types pairing uses (HAP, table 5-6).
    public enum Kind: UInt8, Sendable {
        case method = 0x00, identifier = 0x01, salt = 0x02, publicKey = 0x03, proof = 0x04
        case encryptedData = 0x05, state = 0x06, error = 0x07, retryDelay = 0x08
        case signature = 0x0A, flags = 0x13, separator = 0xFF
    }

    /// Errors a response carries (`kTLVError_*`).
    public enum ErrorCode: UInt8, Sendable {
        case unknown = 0x01, authentication = 0x02, backoff = 0x03, maxPeers = 0x04, maxTries = 0x05, unavailable = 0x06, busy = 0x07
    }

    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Items in order, a split value joined.
    public private(set) var items: [(type: UInt8, value: [UInt8])]

    public init(_ items: [(Kind, [UInt8])] = []) {
        self.items = items.map { ($0.0.rawValue, $0.1) }
    }

    /// Reads `bytes`; an item cut short is malformed. At most 64 KiB: a pairing message is
    /// far smaller.
    public init(parsing bytes: [UInt8]) throws(Malformed) {
        guard bytes.count <= 65_536 else { throw Malformed(description: "a TLV8 body of \(bytes.count) bytes, over 64 KiB") }
        items = []
        var index = 0
        var previousWasFull = false
        while index < bytes.count {
            guard index + 2 <= bytes.count else { throw Malformed(description: "a TLV8 item's header is cut off at byte \(index)") }
            let type = bytes[index], length = Int(bytes[index + 1])
            guard index + 2 + length <= bytes.count else {
                throw Malformed(description: "TLV8 item \(type) says \(length) bytes, \(bytes.count - index - 2) follow")
            }
            let value = Array(bytes[(index + 2)..<(index + 2 + length)])
            // A full item followed by one of the same type continues its value.
            if previousWasFull, let last = items.last, last.type == type {
                items[items.count - 1].value += value
            } else {
                items.append((type, value))
            }
            previousWasFull = length == 255
            index += 2 + length
        }
    }

    public subscript(kind: Kind) -> [UInt8]? {
        items.first { $0.type == kind.rawValue }?.value
    }

    public var state: UInt8? { self[.state]?.first }

    public var encoded: [UInt8] {
        var out: [UInt8] = []
        for (index, (type, value)) in items.enumerated() {
            if value.isEmpty {
                out += [type, 0]
                continue
            }
            var start = 0
            while start < value.count {
                let end = min(start + 255, value.count)
                out += [type, UInt8(end - start)]
                out += value[start..<end]
                start = end
            }
            // A value that ends on a full fragment would take in a next item of its type: an
            // empty fragment ends it (found by fuzz-airplay2).
            if value.count % 255 == 0, index + 1 < items.count, items[index + 1].type == type { out += [type, 0] }
        }
        return out
    }

    public static func == (lhs: TLV8, rhs: TLV8) -> Bool {
        lhs.items.count == rhs.items.count && zip(lhs.items, rhs.items).allSatisfy { $0.type == $1.type && $0.value == $1.value }
    }
}
