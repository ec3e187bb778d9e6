/// A binary property list (`bplist00`, what AirPlay 2's SETUP bodies are) read into typed
/// values, strictly and within bounds. Foundation's decoder traps on some malformed lists
/// (fuzz-airplay2 found one in `BPlistMap.withBuffer`), and a SETUP body comes from any sender
/// that paired, which anyone on the LAN can: a trap there would stop the house.
///
/// Lists that nest deeper than 16, hold more than 4096 values in all (counted as read, so a
/// value referenced twice counts twice), make more than 4 times their size in data and strings
/// or point outside themselves are refused.
public enum BinaryPropertyList: Sendable, Equatable {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case data([UInt8])
    case array([BinaryPropertyList])
    case dictionary([String: BinaryPropertyList])

    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static let maximumDepth = 16
    public static let maximumValues = 4096

    public init(parsing bytes: [UInt8]) throws(Malformed) {
        var reader = try Reader(bytes)
        self = try reader.value(reader.top, depth: 0)
    }

    public subscript(key: String) -> BinaryPropertyList? {
        if case .dictionary(let entries) = self { return entries[key] }
        return nil
    }

    public var integer: Int64? { if case .integer(let value) = self { return value }; return nil }
    public var string: String? { if case .string(let value) = self { return value }; return nil }
    public var data: [UInt8]? { if case .data(let value) = self { return value }; return nil }
    public var array: [BinaryPropertyList]? { if case .array(let value) = self { return value }; return nil }

    private struct Reader {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let top: Int
        let tableStart: Int
        var values = 0
        /// Bytes of data and strings made so far: a value referenced many times is made each
        /// time, so a small list could make a large one (4095 references to 58 KB of data in a
        /// 64 KiB body made 240 MB).
        var madeBytes = 0
        var byteBudget: Int { 4 * bytes.count + 4096 }

        mutating func spend(_ count: Int, at offset: Int) throws(Malformed) {
            madeBytes += count
            guard madeBytes <= byteBudget else { throw Malformed(description: "values larger than 4 times the list (a value referenced over and over, at \(offset))") }
        }

        init(_ bytes: [UInt8]) throws(Malformed) {
            guard bytes.count >= 8 + 32, bytes.starts(with: Array("bplist00".utf8)) else {
                throw Malformed(description: "not a binary property list (no bplist00 header and trailer)")
            }
            self.bytes = bytes
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw Malformed(description: "offsets of \(offsetSize) bytes and references of \(referenceSize)")
            }
            func field(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[at + $1]) } }
            let count = field(trailer + 8), top = field(trailer + 16), table = field(trailer + 24)
            guard count >= 1, count <= UInt64(bytes.count), top < count, table >= 8, table <= UInt64(trailer),
                  (UInt64(trailer) - table) / UInt64(offsetSize) >= count else {
                throw Malformed(description: "a trailer that points outside the list (\(count) objects, top \(top), table at \(table))")
            }
            objectCount = Int(count)
            self.top = Int(top)
            tableStart = Int(table)
        }

        private func number(at index: Int, size: Int) -> Int {
            (0..<size).reduce(0) { $0 << 8 | Int(bytes[index + $1]) }
        }

        /// Where object `reference` starts, within the objects before the offset table.
        private func offset(of reference: Int) throws(Malformed) -> Int {
            guard reference >= 0, reference < objectCount else { throw Malformed(description: "a reference to object \(reference) of \(objectCount)") }
            let offset = number(at: tableStart + reference * offsetSize, size: offsetSize)
            guard offset >= 8, offset < tableStart else { throw Malformed(description: "object \(reference) at \(offset), outside the objects") }
            return offset
        }

        /// `count` bytes from `start`, which must lie before the offset table.
        private func slice(_ start: Int, _ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
            guard count >= 0, start >= 8, start <= tableStart, count <= tableStart - start else {
                throw Malformed(description: "\(count) bytes at \(start) run past the objects")
            }
            return bytes[start..<(start + count)]
        }

        /// The count in a marker's low nibble, or (0xF) in the integer object after it; and
        /// where the contents start.
        private func count(_ marker: UInt8, at offset: Int) throws(Malformed) -> (count: Int, start: Int) {
            let nibble = Int(marker & 0x0F)
            guard nibble == 0x0F else { return (nibble, offset + 1) }
            let head = try slice(offset + 1, 1).first!
            guard head >> 4 == 0x1, head & 0x0F <= 3 else { throw Malformed(description: "a count that is not an integer at \(offset + 1)") }
            let size = 1 << Int(head & 0x0F)
            let value = number(at: try slice(offset + 2, size).startIndex, size: size)
            guard value >= 0, value <= bytes.count else { throw Malformed(description: "a count of \(value) at \(offset + 1)") }
            return (value, offset + 2 + size)
        }

        mutating func value(_ reference: Int, depth: Int) throws(Malformed) -> BinaryPropertyList {
            values += 1
            guard values <= BinaryPropertyList.maximumValues else { throw Malformed(description: "more than \(BinaryPropertyList.maximumValues) values") }
            guard depth <= BinaryPropertyList.maximumDepth else { throw Malformed(description: "nested deeper than \(BinaryPropertyList.maximumDepth)") }
            let offset = try offset(of: reference)
            let marker = bytes[offset]
            switch marker >> 4 {
            case 0x0:
                switch marker {
                case 0x08: return .bool(false)
                case 0x09: return .bool(true)
                default: throw Malformed(description: "marker 0x\(String(marker, radix: 16)) at \(offset)")
                }
            case 0x1:
                guard marker & 0x0F <= 3 else { throw Malformed(description: "an integer of \(1 << Int(marker & 0x0F)) bytes at \(offset)") }
                let size = 1 << Int(marker & 0x0F)
                let raw = try slice(offset + 1, size).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                // 1, 2 and 4 bytes are unsigned, 8 signed (as Apple writes them).
                return .integer(size == 8 ? Int64(bitPattern: raw) : Int64(raw))
            case 0x2:
                let size = 1 << Int(marker & 0x0F)
                guard size == 4 || size == 8 else { throw Malformed(description: "a real of \(size) bytes at \(offset)") }
                let raw = try slice(offset + 1, size).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                return .real(size == 4 ? Double(Float(bitPattern: UInt32(raw))) : Double(bitPattern: raw))
            case 0x4:
                let (count, start) = try count(marker, at: offset)
                try spend(count, at: offset)
                return .data(Array(try slice(start, count)))
            case 0x5:
                let (count, start) = try count(marker, at: offset)
                try spend(count, at: offset)
                let ascii = try slice(start, count)
                guard ascii.allSatisfy({ $0 < 0x80 }) else { throw Malformed(description: "an ASCII string with a byte over 127 at \(offset)") }
                return .string(String(decoding: ascii, as: UTF8.self))
            case 0x6:
                let (count, start) = try count(marker, at: offset)
                guard count <= tableStart / 2 else { throw Malformed(description: "a string of \(count) UTF-16 units at \(offset)") }
                try spend(count * 2, at: offset)
                let raw = try slice(start, count * 2)
                let units = stride(from: raw.startIndex, to: raw.endIndex, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
                return .string(String(decoding: units, as: UTF16.self))
            case 0xA:
                let (count, start) = try count(marker, at: offset)
                guard count <= tableStart / referenceSize else { throw Malformed(description: "an array of \(count) at \(offset)") }
                let references = try slice(start, count * referenceSize)
                var items: [BinaryPropertyList] = []
                for index in 0..<count {
                    items.append(try value(number(at: references.startIndex + index * referenceSize, size: referenceSize), depth: depth + 1))
                }
                return .array(items)
            case 0xD:
                let (count, start) = try count(marker, at: offset)
                guard count <= tableStart / (2 * referenceSize) else { throw Malformed(description: "a dictionary of \(count) at \(offset)") }
                let references = try slice(start, count * 2 * referenceSize)
                var entries: [String: BinaryPropertyList] = [:]
                for index in 0..<count {
                    let keyReference = number(at: references.startIndex + index * referenceSize, size: referenceSize)
                    guard case .string(let key) = try value(keyReference, depth: depth + 1) else {
                        throw Malformed(description: "a dictionary key that is not a string at \(offset)")
                    }
                    entries[key] = try value(number(at: references.startIndex + (count + index) * referenceSize, size: referenceSize), depth: depth + 1)
                }
                return .dictionary(entries)
            default:
                throw Malformed(description: "marker 0x\(String(marker, radix: 16)) (a date, a UID or a set, not taken) at \(offset)")
            }
        }
    }
}
