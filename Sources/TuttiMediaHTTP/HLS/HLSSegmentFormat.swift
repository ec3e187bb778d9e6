import TuttiMedia
/// Checks on HLS segment bytes before they join the stream FFmpeg demuxes, so a broken segment
/// is reported by its URL instead of surfacing later as an anonymous demuxer error, and the
/// fMP4 compatibility test that makes variant switching by concatenation safe.
///
/// Why concatenation works for fMP4: libavformat's mov demuxer reads one `moov` and skips any
/// later one ("duplicated MOOV atom"), then demuxes every `moof`/`mdat` with the first `moov`'s
/// sample description. Media segments of another variant are therefore decoded correctly
/// exactly when its init section describes the same track the same way: same track ID, media
/// timescale, sample entry (codec configuration) and fragment defaults. Bit-rate fields
/// (`esds` bit rates, `btrt`) may differ; they do not change decoding.
///
/// Thread-safety: stateless functions.
enum HLSSegmentFormat {
    /// nil when `bytes` look like a media segment of the expected kind, else the reason in words.
    static func problem(inMediaSegment bytes: [UInt8], isFragmentedMP4: Bool) -> String? {
        if bytes.isEmpty { return "empty segment" }
        if isFragmentedMP4 {
            guard let boxes = try? topLevelBoxes(bytes) else { return "not an fMP4 segment (broken box structure)" }
            let types = Set(boxes.map(\.type))
            return types.contains("moof") && types.contains("mdat") ? nil : "not an fMP4 segment (no moof/mdat)"
        }
        if bytes[0] == 0x47 {
            // MPEG-TS: every 188-byte packet starts with the sync byte.
            var offset = 188
            while offset < bytes.count {
                if bytes[offset] != 0x47 { return "broken MPEG-TS segment (lost packet sync at byte \(offset))" }
                offset += 188
            }
            return nil
        }
        // Packed audio (ADTS, MP3) starts with an ID3 timestamp tag or a frame sync.
        if bytes.count >= 3, bytes[0] == 0x49, bytes[1] == 0x44, bytes[2] == 0x33 { return nil }
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] & 0xE0 == 0xE0 { return nil }
        return "not an MPEG-TS or packed audio segment"
    }

    /// What must match between two init sections for their media segments to be concatenated;
    /// nil when `bytes` are not an init section Tutti can read (treat it as matching nothing else).
    static func signature(ofInitSection bytes: [UInt8]) -> [UInt8]? {
        guard let top = try? topLevelBoxes(bytes), let moov = top.first(where: { $0.type == "moov" }),
              let moovChildren = try? boxes(bytes, in: moov.payload),
              let trak = moovChildren.first(where: { $0.type == "trak" }),
              let trakChildren = try? boxes(bytes, in: trak.payload),
              let tkhd = trakChildren.first(where: { $0.type == "tkhd" }),
              let mdia = trakChildren.first(where: { $0.type == "mdia" }),
              let mdiaChildren = try? boxes(bytes, in: mdia.payload),
              let mdhd = mdiaChildren.first(where: { $0.type == "mdhd" }),
              let minf = mdiaChildren.first(where: { $0.type == "minf" }),
              let stbl = (try? boxes(bytes, in: minf.payload))?.first(where: { $0.type == "stbl" }),
              let stsd = (try? boxes(bytes, in: stbl.payload))?.first(where: { $0.type == "stsd" }),
              stsd.payload.count > 8,
              let entry = (try? boxes(bytes, in: (stsd.payload.lowerBound + 8)..<stsd.payload.upperBound))?.first
        else { return nil }
        var signature: [UInt8] = []
        // Track ID (tkhd) and timescale (mdhd) sit after version-dependent time fields.
        let trackID = bytes[tkhd.payload.lowerBound] == 1 ? 20 : 12
        guard tkhd.payload.count >= trackID + 4, mdhd.payload.count >= 24 else { return nil }
        signature += bytes[(tkhd.payload.lowerBound + trackID)..<(tkhd.payload.lowerBound + trackID + 4)]
        let timescale = bytes[mdhd.payload.lowerBound] == 1 ? 20 : 12
        signature += bytes[(mdhd.payload.lowerBound + timescale)..<(mdhd.payload.lowerBound + timescale + 4)]
        // Sample entry: type and fixed fields (channels, sample size, rate), then its child
        // boxes with bit rates left out.
        signature += Array(entry.type.utf8)
        let audioFields = 28
        guard entry.payload.count >= audioFields else { return nil }
        signature += bytes[entry.payload.lowerBound..<(entry.payload.lowerBound + audioFields)]
        guard let children = try? boxes(bytes, in: (entry.payload.lowerBound + audioFields)..<entry.payload.upperBound) else { return nil }
        for child in children where child.type != "btrt" {
            signature += Array(child.type.utf8)
            if child.type == "esds" {
                guard let config = decoderConfiguration(bytes, esds: child.payload) else { return nil }
                signature += config
            } else {
                signature += bytes[child.payload]
            }
        }
        // Fragment defaults (trex) of the track, which fragments may rely on.
        if let mvex = moovChildren.first(where: { $0.type == "mvex" }),
           let trex = (try? boxes(bytes, in: mvex.payload))?.first(where: { $0.type == "trex" }), trex.payload.count >= 24 {
            signature += bytes[(trex.payload.lowerBound + 4)..<(trex.payload.lowerBound + 24)]
        }
        return signature
    }

    // MARK: Boxes

    struct Box {
        var type: String
        var payload: Range<Int>
    }

    struct BoxError: Error {}

    static func topLevelBoxes(_ bytes: [UInt8]) throws -> [Box] {
        try boxes(bytes, in: 0..<bytes.count)
    }

    /// The boxes filling `range` exactly (ISO/IEC 14496-12 sizes: 32-bit, 64-bit, or 0 for "to the end").
    static func boxes(_ bytes: [UInt8], in range: Range<Int>) throws -> [Box] {
        var result: [Box] = []
        var offset = range.lowerBound
        while offset < range.upperBound {
            guard range.upperBound - offset >= 8 else { throw BoxError() }
            var size = Int(uint32(bytes, offset))
            let typeBytes = bytes[(offset + 4)..<(offset + 8)]
            guard typeBytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { throw BoxError() }
            var header = 8
            if size == 1 {
                guard range.upperBound - offset >= 16 else { throw BoxError() }
                let large = (UInt64(uint32(bytes, offset + 8)) << 32) | UInt64(uint32(bytes, offset + 12))
                guard large <= UInt64(range.upperBound - offset) else { throw BoxError() }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            guard size >= header, size <= range.upperBound - offset else { throw BoxError() }
            result.append(Box(type: String(decoding: typeBytes, as: UTF8.self), payload: (offset + header)..<(offset + size)))
            offset += size
        }
        return result
    }

    private static func uint32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    /// From an `esds` payload: object type, stream type and the DecoderSpecificInfo (for AAC,
    /// the AudioSpecificConfig), without the buffer size and bit rates.
    private static func decoderConfiguration(_ bytes: [UInt8], esds: Range<Int>) -> [UInt8]? {
        var offset = esds.lowerBound + 4  // version and flags
        func descriptor() -> (tag: UInt8, body: Range<Int>)? {
            guard offset < esds.upperBound else { return nil }
            let tag = bytes[offset]
            offset += 1
            var length = 0
            for _ in 0..<4 {
                guard offset < esds.upperBound else { return nil }
                let byte = bytes[offset]
                offset += 1
                length = length << 7 | Int(byte & 0x7F)
                if byte & 0x80 == 0 { break }
            }
            guard length <= esds.upperBound - offset else { return nil }
            return (tag, offset..<(offset + length))
        }
        guard let es = descriptor(), es.tag == 0x03, es.body.count >= 3 else { return nil }
        let flags = bytes[es.body.lowerBound + 2]
        offset = es.body.lowerBound + 3
        if flags & 0x80 != 0 { offset += 2 }
        if flags & 0x40 != 0, offset < es.body.upperBound { offset += 1 + Int(bytes[offset]) }
        if flags & 0x20 != 0 { offset += 2 }
        while let sub = descriptor() {
            if sub.tag == 0x04, sub.body.count >= 13 {
                var config = Array(bytes[sub.body.lowerBound..<(sub.body.lowerBound + 2)])
                offset = sub.body.lowerBound + 13
                while let inner = descriptor() {
                    if inner.tag == 0x05 { config += bytes[inner.body] }
                    offset = inner.body.upperBound
                }
                return config
            }
            offset = sub.body.upperBound
        }
        return nil
    }
}
