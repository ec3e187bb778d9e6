#if canImport(Glibc)
import Glibc
#endif

/// Reads byte ranges of a file, for the few header fields libavformat does not expose exactly.
final class FileBytes {
    private let descriptor: Int32
    let size: Int64

    init?(path: String) {
        descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { close(descriptor); return nil }
        size = Int64(status.st_size)
    }

    deinit { close(descriptor) }

    /// Up to `count` bytes at `offset`; fewer at the end of the file.
    func read(at offset: Int64, count: Int) -> [UInt8] {
        guard offset >= 0, count > 0, offset < size else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(min(Int64(count), size - offset)))
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + filled, $0.count - filled, off_t(offset) + off_t(filled)) }
            if n <= 0 { break }
            filled += n
        }
        return Array(bytes.prefix(filled))
    }
}

extension Array where Element == UInt8 {
    /// Big-endian unsigned integer of `width` bytes at `offset`, or nil past the end.
    func bigEndian(at offset: Int, width: Int) -> UInt64? {
        guard offset >= 0, width <= 8, offset + width <= count else { return nil }
        var value: UInt64 = 0
        for i in offset..<(offset + width) { value = value << 8 | UInt64(self[i]) }
        return value
    }

    func fourCC(at offset: Int) -> String? {
        guard offset >= 0, offset + 4 <= count else { return nil }
        return String(decoding: self[offset..<(offset + 4)], as: UTF8.self)
    }
}

/// MP3 gapless length from the Xing/Info frame and its LAME extension:
/// frames × samples per frame − encoder delay − padding. libavformat trims the decoded audio
/// with these values but reports a duration that still includes the padding.
enum LAMEHeader {
    static func exactFrameCount(path: String, sampleRate: Int) -> Int64? {
        guard let file = FileBytes(path: path) else { return nil }
        // Skip ID3v2 tags (10-byte header, syncsafe size, optional 10-byte footer).
        var offset: Int64 = 0
        while true {
            let header = file.read(at: offset, count: 10)
            guard header.count == 10, header[0] == 0x49, header[1] == 0x44, header[2] == 0x33 else { break }
            let size = header[6...9].reduce(Int64(0)) { $0 << 7 | Int64($1 & 0x7F) }
            offset += 10 + size + (header[5] & 0x10 != 0 ? 10 : 0)
        }
        let bytes = file.read(at: offset, count: 4096)
        // The first frame header after the tags: sync, MPEG version, Layer III, valid rate.
        guard let start = (0..<max(0, bytes.count - 4)).first(where: { i in
            bytes[i] == 0xFF && bytes[i + 1] & 0xE0 == 0xE0 && (bytes[i + 1] >> 3) & 3 != 1
                && (bytes[i + 1] >> 1) & 3 == 1 && (bytes[i + 2] >> 2) & 3 != 3 && bytes[i + 2] >> 4 != 15
        }) else { return nil }
        let version = (bytes[start + 1] >> 3) & 3  // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
        let mono = bytes[start + 3] >> 6 == 3
        let rate = [44100, 48000, 32000][Int((bytes[start + 2] >> 2) & 3)] / (version == 3 ? 1 : version == 2 ? 2 : 4)
        let samplesPerFrame: Int64 = version == 3 ? 1152 : 576
        let sideInfo = version == 3 ? (mono ? 17 : 32) : (mono ? 9 : 17)
        let tag = start + 4 + sideInfo
        guard rate == sampleRate, let name = bytes.fourCC(at: tag), name == "Xing" || name == "Info",
              let flags = bytes.bigEndian(at: tag + 4, width: 4), flags & 1 != 0,
              let frames = bytes.bigEndian(at: tag + 8, width: 4) else { return nil }
        // Frames, then optional byte count, 100-byte TOC and quality; then the LAME extension.
        let lame = tag + 12 + (flags & 2 != 0 ? 4 : 0) + (flags & 4 != 0 ? 100 : 0) + (flags & 8 != 0 ? 4 : 0)
        guard let encoder = bytes.fourCC(at: lame), ["LAME", "Lavf", "Lavc"].contains(encoder),
              let delayAndPadding = bytes.bigEndian(at: lame + 21, width: 3) else { return nil }
        let length = Int64(frames) * samplesPerFrame - Int64(delayAndPadding >> 12) - Int64(delayAndPadding & 0xFFF)
        return length > 0 ? length : nil
    }
}

/// Timing of one sound track of an MP4/QuickTime file, in its media timescale.
struct MP4TrackTiming: Equatable {
    /// Leading frames to drop (the edit list's media time: the encoder's priming); nil without an edit list.
    var priming: Int64?
    /// Frames to present after the priming.
    var frameCount: Int64
    var timescale: Int
}

/// Exact gapless timing from an MP4's boxes. libavformat applies the edit list at the movie
/// timescale's precision (1 ms in files FFmpeg writes), which drops or adds up to a millisecond
/// at the end, and drops the last packet entirely when the rounded edit ends before it.
enum MP4Timing {
    /// Sound tracks by track ID, or nil when the file is not plain (unfragmented) MP4 or has an
    /// edit list other than one edit that skips priming; then libavformat's handling applies.
    static func soundTracks(path: String) -> [Int32: MP4TrackTiming]? {
        guard let file = FileBytes(path: path), file.read(at: 0, count: 8).fourCC(at: 4) == "ftyp" else { return nil }
        var offset: Int64 = 0
        while offset + 8 <= file.size {
            let header = file.read(at: offset, count: 16)
            guard var size = header.bigEndian(at: 0, width: 4).map(Int64.init), let type = header.fourCC(at: 4) else { return nil }
            var headerSize: Int64 = 8
            if size == 1 {
                guard let large = header.bigEndian(at: 8, width: 8), large < UInt64(Int64.max) else { return nil }
                size = Int64(large)
                headerSize = 16
            } else if size == 0 {
                size = file.size - offset
            }
            guard size >= headerSize else { return nil }
            if type == "moov" {
                guard size <= 64 << 20 else { return nil }
                let moov = file.read(at: offset + headerSize, count: Int(size - headerSize))
                guard moov.count == Int(size - headerSize) else { return nil }
                return parseMovie(moov)
            }
            offset += size
        }
        return nil
    }

    private static func children(_ bytes: [UInt8], _ range: Range<Int>) -> [(type: String, body: Range<Int>)] {
        var boxes: [(String, Range<Int>)] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            guard let size32 = bytes.bigEndian(at: offset, width: 4), let type = bytes.fourCC(at: offset + 4) else { break }
            var size = Int(size32), header = 8
            if size == 1 {
                guard let large = bytes.bigEndian(at: offset + 8, width: 8), large <= UInt64(range.upperBound - offset) else { break }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            guard size >= header, offset + size <= range.upperBound else { break }
            boxes.append((type, (offset + header)..<(offset + size)))
            offset += size
        }
        return boxes
    }

    private static func child(_ bytes: [UInt8], _ range: Range<Int>, _ path: String...) -> Range<Int>? {
        var current = range
        for type in path {
            guard let next = children(bytes, current).first(where: { $0.type == type }) else { return nil }
            current = next.body
        }
        return current
    }

    /// A full box's field: version 0 uses `width0` bytes at `offset0`, version 1 `width1` at `offset1`.
    private static func versioned(_ bytes: [UInt8], _ body: Range<Int>, v0 offset0: Int, _ width0: Int, v1 offset1: Int, _ width1: Int) -> UInt64? {
        guard body.count > 0 else { return nil }
        return bytes[body.lowerBound] == 1
            ? bytes.bigEndian(at: body.lowerBound + offset1, width: width1)
            : bytes.bigEndian(at: body.lowerBound + offset0, width: width0)
    }

    private static func parseMovie(_ moov: [UInt8]) -> [Int32: MP4TrackTiming]? {
        let all = 0..<moov.count
        guard child(moov, all, "mvex") == nil,  // fragmented: the sample tables are elsewhere
              let mvhd = child(moov, all, "mvhd"),
              let movieScale = versioned(moov, mvhd, v0: 12, 4, v1: 20, 4), movieScale > 0 else { return nil }
        var tracks: [Int32: MP4TrackTiming] = [:]
        for trak in children(moov, all) where trak.type == "trak" {
            guard let hdlr = child(moov, trak.body, "mdia", "hdlr"), moov.fourCC(at: hdlr.lowerBound + 8) == "soun" else { continue }
            guard let tkhd = child(moov, trak.body, "tkhd"),
                  let trackID = versioned(moov, tkhd, v0: 12, 4, v1: 20, 4),
                  let mdhd = child(moov, trak.body, "mdia", "mdhd"),
                  let mediaScale = versioned(moov, mdhd, v0: 12, 4, v1: 20, 4), mediaScale > 0,
                  let stts = child(moov, trak.body, "mdia", "minf", "stbl", "stts"),
                  let entryCount = moov.bigEndian(at: stts.lowerBound + 4, width: 4),
                  stts.count >= 8 + Int(entryCount) * 8 else { return nil }
            var mediaFrames: Int64 = 0
            for i in 0..<Int(entryCount) {
                let entry = stts.lowerBound + 8 + i * 8
                let (frames, overflow) = Int64(moov.bigEndian(at: entry, width: 4)!)
                    .multipliedReportingOverflow(by: Int64(moov.bigEndian(at: entry + 4, width: 4)!))
                guard !overflow, frames <= Int64.max - mediaFrames else { return nil }
                mediaFrames += frames
            }
            var timing = MP4TrackTiming(priming: nil, frameCount: mediaFrames, timescale: Int(mediaScale))
            if let elst = child(moov, trak.body, "edts", "elst") {
                // One entry: segment duration (movie timescale), media time, rate 1.0 (16.16).
                let width = moov[elst.lowerBound] == 1 ? 8 : 4
                let entry = elst.lowerBound + 8
                guard moov.bigEndian(at: elst.lowerBound + 4, width: 4) == 1,
                      let segment = moov.bigEndian(at: entry, width: width),
                      let rawMediaTime = moov.bigEndian(at: entry + width, width: width),
                      moov.bigEndian(at: entry + 2 * width, width: 4) == 0x0001_0000
                else { return nil }
                let priming = width == 8 ? Int64(bitPattern: rawMediaTime) : Int64(Int32(bitPattern: UInt32(rawMediaTime)))
                // Media time -1 (an empty edit) or beyond the media: leave it to libavformat.
                let remainder = mediaFrames - priming
                guard priming >= 0, remainder > 0, segment < UInt64(Int64.max) / mediaScale else { return nil }
                let editFrames = (Int64(segment) * Int64(mediaScale) + Int64(movieScale) / 2) / Int64(movieScale)
                let tick = (Int64(mediaScale) + Int64(movieScale) - 1) / Int64(movieScale)
                // An edit that ends within one movie tick of the media's end means "to the end":
                // its duration is only the remainder rounded to the movie timescale.
                timing.priming = priming
                timing.frameCount = segment == 0 || editFrames >= remainder - tick ? remainder : editFrames
            }
            tracks[Int32(truncatingIfNeeded: trackID)] = timing
        }
        return tracks
    }
}
