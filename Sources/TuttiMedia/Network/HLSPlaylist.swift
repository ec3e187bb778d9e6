import Foundation
import TuttiCore

/// An HLS playlist (RFC 8216) as Tutti plays it: a master playlist lists variants of the same
/// audio at different bit rates; a media playlist lists the segments of one variant.
///
/// Parsing is lenient about what does not change playback (unknown tags, a missing
/// `EXT-X-TARGETDURATION`) and strict about what does: a broken line throws one line naming
/// the playlist URL and the line number. URIs come out absolute, resolved against the
/// playlist's URL.
public enum HLSPlaylist: Sendable, Equatable {
    case master(HLSMasterPlaylist)
    case media(HLSMediaPlaylist)

    /// Parses `text` fetched from `url` (which names it in errors and resolves relative URIs).
    public static func parse(_ text: String, url: String) throws(MediaError) -> HLSPlaylist {
        var parser = HLSPlaylistParser(url: url)
        return try parser.parse(text)
    }
}

/// One entry of a master playlist (`EXT-X-STREAM-INF` and the URI after it).
public struct HLSVariant: Sendable, Hashable {
    /// The variant's media playlist, absolute.
    public var url: String
    /// Peak bits per second of its segments (`BANDWIDTH`).
    public var bandwidth: Int
    /// Average bits per second (`AVERAGE-BANDWIDTH`), when stated.
    public var averageBandwidth: Int?
    /// RFC 6381 codec names (`CODECS`), e.g. ["mp4a.40.2"]; empty when not stated.
    public var codecs: [String]

    public init(url: String, bandwidth: Int, averageBandwidth: Int? = nil, codecs: [String] = []) {
        self.url = url
        self.bandwidth = bandwidth
        self.averageBandwidth = averageBandwidth
        self.codecs = codecs
    }
}

public struct HLSMasterPlaylist: Sendable, Equatable {
    public var url: String
    /// In playlist order.
    public var variants: [HLSVariant]
}

/// Bytes of a resource: the whole of it, or a range (`EXT-X-BYTERANGE`, `BYTERANGE=`).
public struct HLSResource: Sendable, Hashable {
    public var url: String
    public var byteRange: Range<Int64>?

    public init(url: String, byteRange: Range<Int64>? = nil) {
        self.url = url
        self.byteRange = byteRange
    }
}

public struct HLSSegment: Sendable, Equatable {
    /// Media sequence number: `EXT-X-MEDIA-SEQUENCE` plus the segment's index. Aligned variants
    /// number the same media alike, which is what makes switching at a boundary exact.
    public var sequence: Int
    public var resource: HLSResource
    /// `EXTINF`, exact to the microsecond.
    public var duration: MediaTime
    /// The fMP4 initialization section in effect (`EXT-X-MAP`); nil for MPEG-TS and packed audio.
    public var initSection: HLSResource?
    /// Preceded by `EXT-X-DISCONTINUITY`: timestamps (or encoding) may change here.
    public var isDiscontinuity: Bool
    /// 1-based line of the segment's URI, for messages.
    public var line: Int

    public var url: String { resource.url }
}

public struct HLSMediaPlaylist: Sendable, Equatable {
    public var url: String
    /// Seconds; the longest segment rounded up when the tag is missing.
    public var targetDuration: Int
    public var mediaSequence: Int
    public var segments: [HLSSegment]
    /// `EXT-X-ENDLIST`: no segments will be added (VOD, or a finished live stream).
    public var isEnded: Bool
    /// `EXT-X-PLAYLIST-TYPE:EVENT`: segments are only ever appended, so starting at the first is fine.
    public var isEvent: Bool

    /// Sum of the segment durations.
    public var totalDuration: MediaTime {
        segments.reduce(MediaTime(value: 0, timescale: HLSPlaylistParser.timescale)) { $0 + $1.duration }
    }
}

/// The line-by-line parser behind `HLSPlaylist.parse`. Not thread-safe (a value used once).
struct HLSPlaylistParser {
    static let timescale: Int32 = 1_000_000

    let url: String
    private var lineNumber = 0
    private var base: URL?

    init(url: String) {
        self.url = url
        base = URL(string: url)
    }

    mutating func parse(_ text: String) throws(MediaError) -> HLSPlaylist {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if let first = lines.first, first.hasPrefix("\u{FEFF}") { lines[0] = String(first.dropFirst()) }
        guard lines.first == "#EXTM3U" else {
            lineNumber = 1
            throw broken("not an HLS playlist (the first line is not #EXTM3U)")
        }

        var variants: [HLSVariant] = []
        var pendingVariant: (attributes: [String: String], line: Int)?
        var segments: [HLSSegment] = []
        var pendingDuration: (duration: MediaTime, line: Int)?
        var pendingRange: (length: Int64, offset: Int64?)?
        var lastRange: (url: String, end: Int64)?
        var pendingDiscontinuity = false
        var totalMicroseconds: Int64 = 0
        var initSection: HLSResource?
        var targetDuration: Int?
        var mediaSequence = 0
        var isEnded = false
        var isEvent = false
        var sawMediaTag = false

        for (index, line) in lines.enumerated().dropFirst() {
            lineNumber = index + 1
            if line.isEmpty { continue }
            if !line.hasPrefix("#") {
                // A URI: of the variant or segment its tags described.
                if let variant = pendingVariant {
                    let bandwidth = try integer(variant.attributes["BANDWIDTH"], "BANDWIDTH", line: variant.line)
                    var average: Int? = nil
                    if let value = variant.attributes["AVERAGE-BANDWIDTH"] { average = try integer(value, "AVERAGE-BANDWIDTH", line: variant.line) }
                    let codecs = variant.attributes["CODECS"].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
                    variants.append(HLSVariant(url: try resolve(line), bandwidth: bandwidth, averageBandwidth: average, codecs: codecs))
                    pendingVariant = nil
                } else if let duration = pendingDuration {
                    let segmentURL = try resolve(line)
                    var range: Range<Int64>? = nil
                    if let pending = pendingRange {
                        // Without an offset, a range continues where the previous one of the same resource ended.
                        guard let start = pending.offset ?? (lastRange?.url == segmentURL ? lastRange?.end : nil) else {
                            throw broken("#EXT-X-BYTERANGE without an offset does not follow a range of the same URI")
                        }
                        let (end, overflow) = start.addingReportingOverflow(pending.length)
                        guard !overflow else { throw broken("#EXT-X-BYTERANGE ends past byte \(Int64.max)") }
                        range = start..<end
                        lastRange = (segmentURL, end)
                    }
                    // Hostile numbers must not trap: the player counts on from the last segment's
                    // sequence number and adds up the durations (`totalDuration`).
                    guard mediaSequence < Int.max - segments.count else { throw broken("media sequence numbers run past \(Int.max)") }
                    let (total, overflow) = totalMicroseconds.addingReportingOverflow(duration.duration.value)
                    guard !overflow else { throw broken("the segments last longer than \(Int64.max) µs") }
                    totalMicroseconds = total
                    segments.append(HLSSegment(sequence: mediaSequence + segments.count, resource: HLSResource(url: segmentURL, byteRange: range),
                                               duration: duration.duration, initSection: initSection,
                                               isDiscontinuity: pendingDiscontinuity, line: lineNumber))
                    pendingDuration = nil
                    pendingRange = nil
                    pendingDiscontinuity = false
                } else {
                    throw broken("URI \"\(line)\" without #EXTINF or #EXT-X-STREAM-INF before it")
                }
                continue
            }
            let (tag, value) = Self.split(line)
            switch tag {
            case "#EXT-X-STREAM-INF":
                if pendingVariant != nil { throw broken("#EXT-X-STREAM-INF follows another without a URI between them") }
                let attributes = try attributeList(value)
                guard attributes["BANDWIDTH"] != nil else { throw broken("#EXT-X-STREAM-INF without BANDWIDTH") }
                pendingVariant = (attributes, lineNumber)
            case "#EXTINF":
                sawMediaTag = true
                let text = (value ?? "").split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
                guard let duration = Self.microseconds(text), duration >= 0 else {
                    throw broken("#EXTINF duration \"\(text)\" is not a number of seconds")
                }
                pendingDuration = (MediaTime(value: duration, timescale: Self.timescale), lineNumber)
            case "#EXT-X-TARGETDURATION":
                sawMediaTag = true
                targetDuration = try integer(value, "#EXT-X-TARGETDURATION", line: lineNumber)
            case "#EXT-X-MEDIA-SEQUENCE":
                sawMediaTag = true
                guard segments.isEmpty else { throw broken("#EXT-X-MEDIA-SEQUENCE after the first segment") }
                mediaSequence = try integer(value, "#EXT-X-MEDIA-SEQUENCE", line: lineNumber)
            case "#EXT-X-BYTERANGE":
                let parts = (value ?? "").split(separator: "@")
                guard (1...2).contains(parts.count), let length = Int64(parts[0]), length > 0,
                      parts.count == 1 || Int64(parts[1]).map({ $0 >= 0 }) == true else {
                    throw broken("#EXT-X-BYTERANGE \"\(value ?? "")\" is not LENGTH[@OFFSET]")
                }
                pendingRange = (length, parts.count == 2 ? Int64(parts[1]) : nil)
            case "#EXT-X-MAP":
                let attributes = try attributeList(value)
                guard let uri = attributes["URI"] else { throw broken("#EXT-X-MAP without URI") }
                var range: Range<Int64>? = nil
                if let text = attributes["BYTERANGE"] {
                    let parts = text.split(separator: "@")
                    guard parts.count == 2, let length = Int64(parts[0]), let offset = Int64(parts[1]), length > 0, offset >= 0 else {
                        throw broken("#EXT-X-MAP BYTERANGE \"\(text)\" is not LENGTH@OFFSET")
                    }
                    let (end, overflow) = offset.addingReportingOverflow(length)
                    guard !overflow else { throw broken("#EXT-X-MAP BYTERANGE \"\(text)\" ends past byte \(Int64.max)") }
                    range = offset..<end
                }
                initSection = HLSResource(url: try resolve(uri), byteRange: range)
            case "#EXT-X-KEY":
                let attributes = try attributeList(value)
                if let method = attributes["METHOD"], method != "NONE" {
                    throw MediaError(.unsupported, input: url, reason: "line \(lineNumber): encrypted segments (METHOD=\(method)) are not supported")
                }
            case "#EXT-X-DISCONTINUITY": pendingDiscontinuity = true
            case "#EXT-X-ENDLIST": isEnded = true
            case "#EXT-X-PLAYLIST-TYPE":
                isEvent = value == "EVENT"
                if value == "VOD" { sawMediaTag = true }
            default:
                break  // Comments and tags that do not change what is played.
            }
        }
        lineNumber = (lines.lastIndex { !$0.isEmpty } ?? 0) + 1
        if let variant = pendingVariant {
            lineNumber = variant.line
            throw broken("#EXT-X-STREAM-INF without a URI after it")
        }
        if let pending = pendingDuration {
            lineNumber = pending.line
            throw broken("#EXTINF without a segment URI after it")
        }
        if !variants.isEmpty {
            if sawMediaTag || !segments.isEmpty { throw broken("mixes master playlist tags (#EXT-X-STREAM-INF) with media playlist tags") }
            return .master(HLSMasterPlaylist(url: url, variants: variants))
        }
        guard sawMediaTag || !segments.isEmpty else { throw broken("lists neither variants (#EXT-X-STREAM-INF) nor segments (#EXTINF)") }
        let longest = segments.map(\.duration).max().map { Int(($0.value + Int64(Self.timescale) - 1) / Int64(Self.timescale)) } ?? 1
        return .media(HLSMediaPlaylist(url: url, targetDuration: max(1, targetDuration ?? longest), mediaSequence: mediaSequence,
                                       segments: segments, isEnded: isEnded, isEvent: isEvent))
    }

    // MARK: Pieces

    private func broken(_ reason: String) -> MediaError {
        MediaError(.corrupt, input: url, reason: "broken playlist, line \(lineNumber): \(reason)")
    }

    private func attributeList(_ value: String?) throws(MediaError) -> [String: String] {
        let parsed = Self.attributes(value ?? "")
        if let problem = parsed.problem { throw broken(problem) }
        return parsed.values
    }

    private func resolve(_ uri: String) throws(MediaError) -> String {
        guard let resolved = URL(string: uri, relativeTo: base)?.absoluteString, !resolved.isEmpty else {
            throw broken("URI \"\(uri)\" is not a valid URL")
        }
        return resolved
    }

    private func integer(_ value: String?, _ name: String, line: Int) throws(MediaError) -> Int {
        guard let value, let number = Int(value), number >= 0 else {
            var copy = self
            copy.lineNumber = line
            throw copy.broken("\(name) \"\(value ?? "")\" is not a non-negative integer")
        }
        return number
    }

    /// "#TAG:VALUE" → ("#TAG", "VALUE"); "#TAG" → ("#TAG", nil).
    static func split(_ line: String) -> (tag: String, value: String?) {
        guard let colon = line.firstIndex(of: ":") else { return (line, nil) }
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    }

    /// An attribute list: `KEY=VALUE` pairs separated by commas, where a quoted value may hold commas.
    static func attributes(_ text: String) -> (values: [String: String], problem: String?) {
        var result: [String: String] = [:]
        var rest = Substring(text)
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else {
                return (result, "attribute \"\(rest)\" has no value")
            }
            let key = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...]
            let value: Substring
            if rest.first == "\"" {
                let body = rest.dropFirst()
                guard let close = body.firstIndex(of: "\"") else {
                    return (result, "attribute \(key) has an unterminated quoted value")
                }
                value = body[..<close]
                rest = body[body.index(after: close)...]
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end]
                rest = rest[end...]
            }
            result[key] = value.trimmingCharacters(in: .whitespaces)
            if rest.first == "," { rest = rest.dropFirst() } else if !rest.isEmpty {
                return (result, "attribute \(key) is followed by \"\(rest)\" instead of a comma")
            }
        }
        return (result, nil)
    }

    /// "2.005333" → 2005333 (rounded to the microsecond), exactly: no binary floating point.
    static func microseconds(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty || parts.count == 2, whole.allSatisfy(\.isASCII) else { return nil }
        guard let seconds = whole.isEmpty ? 0 : Int64(whole), seconds >= 0, seconds < 1 << 40 else { return nil }
        var micros: Int64 = 0
        if parts.count == 2 {
            let fraction = parts[1]
            guard fraction.allSatisfy({ $0.isASCII && $0.isNumber }), !(whole.isEmpty && fraction.isEmpty) else { return nil }
            let digits = Array(fraction.utf8.map { Int64($0 - 48) })
            for i in 0..<6 { micros = micros * 10 + (i < digits.count ? digits[i] : 0) }
            if digits.count > 6, digits[6] >= 5 { micros += 1 }
        }
        return seconds * 1_000_000 + micros
    }
}
