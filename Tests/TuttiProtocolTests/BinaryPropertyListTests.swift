import Foundation
import Testing
import TuttiProtocol

/// `BinaryPropertyList` against what Foundation writes, and against lists made to hurt: a cycle,
/// a list that references one value exponentially often, one nested too deep, offsets outside.
@Suite struct BinaryPropertyListTests {
    func written(_ object: Any) throws -> [UInt8] {
        Array(try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0))
    }

    @Test func readsWhatFoundationWrites() throws {
        let object: [String: Any] = [
            "streams": [["type": 96, "ct": 1, "shk": Data((0..<32).map { UInt8($0) }), "controlPort": 6001, "isMedia": true, "ratio": 1.5]],
            "name": "Küche — pyatv", "timingPort": 65535, "big": Int64.max, "negative": -7, "small": 3, "empty": [String: Int](), "list": [1, 2, 3],
            "long": String(repeating: "x", count: 300),
        ]
        let list = try BinaryPropertyList(parsing: written(object))
        #expect(list["name"] == .string("Küche — pyatv"))
        #expect(list["timingPort"] == .integer(65535) && list["big"] == .integer(Int64.max) && list["negative"] == .integer(-7) && list["small"] == .integer(3))
        #expect(list["empty"] == .dictionary([:]) && list["list"] == .array([.integer(1), .integer(2), .integer(3)]))
        #expect(list["long"]?.string?.count == 300)
        let stream = try #require(list["streams"]?.array?.first)
        #expect(stream["shk"] == .data((0..<32).map { UInt8($0) }) && stream["isMedia"] == .bool(true) && stream["ratio"] == .real(1.5))
    }

    /// A hand-made list: header, the objects given, the offset table and the trailer.
    func list(_ objects: [[UInt8]], top: UInt64 = 0, referenceSize: UInt8 = 1) -> [UInt8] {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects { offsets.append(bytes.count); bytes += object }
        let table = bytes.count
        for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
        func be(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) } }
        bytes += [0, 0, 0, 0, 0, 0, 2, referenceSize] + be(UInt64(objects.count)) + be(top) + be(UInt64(table))
        return bytes
    }

    @Test func refusesListsMadeToHurt() throws {
        #expect(try BinaryPropertyList(parsing: list([[0x10, 42]])) == .integer(42))
        // An array that holds itself.
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list([[0xA1, 0]])) }
        // Twenty arrays, each holding the next twice: 2^20 values from 21 objects.
        let doubling = (0..<20).map { [0xA2, UInt8($0 + 1), UInt8($0 + 1)] } + [[0x10, 1]]
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list(doubling)) }
        // An array of 200 references to one 2 KB data object: 400 KB from a 2.6 KB list.
        let amplified = [[0xAF, 0x10, 200] + Array(repeating: UInt8(1), count: 200), [0x4F, 0x11, 0x07, 0xD0] + Array(repeating: UInt8(7), count: 2000)]
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list(amplified)) }
        // Nested 17 deep.
        let deep = (0..<17).map { [0xA1, UInt8($0 + 1)] } + [[0x10, 1]]
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list(deep)) }
        // A reference past the objects, a string longer than the list, a dictionary key that is
        // not a string, a truncated list, and Foundation's own trap (fuzz-airplay2).
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list([[0xA1, 9]])) }
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list([[0x5F, 0x13, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]])) }
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: list([[0xD1, 1, 1], [0x10, 1]])) }
        let whole = list([[0x10, 42]])
        #expect(throws: BinaryPropertyList.Malformed.self) { try BinaryPropertyList(parsing: Array(whole.dropLast())) }
        let trap = try [UInt8](Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/FailCases/fuzz-airplay2/bplist-foundation-traps")))
        _ = try? BinaryPropertyList(parsing: trap)  // refused or read: either, but no trap
    }
}
