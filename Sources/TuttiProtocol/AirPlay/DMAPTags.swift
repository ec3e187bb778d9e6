/// DMAP, the tagged format AirPlay senders describe a track in (`SET_PARAMETER` with
/// `application/x-dmap-tagged`): each item a 4-byte code, a 4-byte big-endian length and that
/// many bytes; `mlit` holds the item's tags. Only the text tags a receiver shows are read.
public struct DMAPTags: Sendable, Equatable {
    public var title: String?
    public var artist: String?
    public var album: String?

    /// Containers nest at most this deep; a body that goes deeper is read no further.
    public static let maximumDepth = 4

    public init(title: String? = nil, artist: String? = nil, album: String? = nil) {
        self.title = title
        self.artist = artist
        self.album = album
    }

    /// Reads what the bytes hold; a truncated or malformed item ends the reading, keeping the
    /// tags read before it.
    public init(_ bytes: [UInt8]) {
        self.init()
        read(bytes[...], depth: 0)
    }

    private mutating func read(_ bytes: ArraySlice<UInt8>, depth: Int) {
        var index = bytes.startIndex
        while index + 8 <= bytes.endIndex {
            let code = String(decoding: bytes[index..<(index + 4)], as: UTF8.self)
            let length = Int(UInt32(bytes[index + 4]) << 24 | UInt32(bytes[index + 5]) << 16 | UInt32(bytes[index + 6]) << 8 | UInt32(bytes[index + 7]))
            let start = index + 8
            guard length <= bytes.endIndex - start else { return }
            let value = bytes[start..<(start + length)]
            switch code {
            case "mlit", "cmst", "mdst":
                if depth < Self.maximumDepth { read(value, depth: depth + 1) }
            case "minm": title = String(validating: value, as: UTF8.self)
            case "asar": artist = String(validating: value, as: UTF8.self)
            case "asal": album = String(validating: value, as: UTF8.self)
            default: break
            }
            index = start + length
        }
    }
}
