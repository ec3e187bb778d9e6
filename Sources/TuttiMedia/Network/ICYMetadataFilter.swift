import Foundation

/// Separates Shoutcast/Icecast ("ICY") in-band metadata from the audio bytes of an internet
/// radio stream: with `Icy-MetaData: 1` the server inserts, every `interval` audio bytes, one
/// length byte (×16) and that many bytes of `StreamTitle='…';StreamUrl='…';`.
///
/// In Media rather than MediaHTTP, as `HLSPlaylist` is: its fuzz target (fuzz-icy) builds
/// without the HTTP stack.
///
/// Not thread-safe: one downloading task feeds it.
public struct ICYMetadataFilter: Sendable {
    public let interval: Int
    private var audioUntilMetadata: Int
    private var metadataRemaining = 0
    private var expectingLength = false
    private var metadata: [UInt8] = []

    public init(interval: Int) {
        precondition(interval > 0)
        self.interval = interval
        audioUntilMetadata = interval
    }

    /// Feeds received bytes; appends the audio bytes to `audio` and returns the titles announced.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, audio: inout [UInt8]) -> [String] {
        var titles: [String] = []
        var index = 0
        while index < bytes.count {
            if audioUntilMetadata > 0 {
                let count = min(audioUntilMetadata, bytes.count - index)
                audio.append(contentsOf: bytes[index..<index + count])
                index += count
                audioUntilMetadata -= count
                if audioUntilMetadata == 0 { expectingLength = true }
            } else if expectingLength {
                metadataRemaining = Int(bytes[index]) * 16
                index += 1
                expectingLength = false
                metadata.removeAll(keepingCapacity: true)
                if metadataRemaining == 0 { audioUntilMetadata = interval }
            } else {
                let count = min(metadataRemaining, bytes.count - index)
                metadata.append(contentsOf: bytes[index..<index + count])
                index += count
                metadataRemaining -= count
                if metadataRemaining == 0 {
                    if let title = Self.streamTitle(in: metadata) { titles.append(title) }
                    audioUntilMetadata = interval
                }
            }
        }
        return titles
    }

    /// The `StreamTitle` value of one metadata block, if it has a non-empty one.
    public static func streamTitle(in block: [UInt8]) -> String? {
        let text = String(decoding: block.prefix { $0 != 0 }, as: UTF8.self)
        guard let start = text.range(of: "StreamTitle='") else { return nil }
        let rest = text[start.upperBound...]
        // The value ends at "';" (titles may contain a lone apostrophe).
        let end = rest.range(of: "';")?.lowerBound ?? rest.lastIndex(of: "'") ?? rest.endIndex
        let title = String(rest[..<end])
        return title.isEmpty ? nil : title
    }
}
