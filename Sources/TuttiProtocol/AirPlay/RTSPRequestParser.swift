/// Reads RTSP requests from a TCP byte stream, incrementally: bytes go in as they arrive,
/// whole requests come out. It never trusts the sender: a request line or a header section
/// past its limit, a body longer than `maximumBodyBytes`, a malformed line, each is a
/// `Refusal` naming what was wrong, answered with the status it carries and the connection
/// closed (the stream's framing is lost after it).
public struct RTSPRequestParser: Sendable {
    public struct Refusal: Error, Equatable, Sendable {
        /// The RTSP status to answer with (400, 413, 431, 505).
        public var status: Int
        public var reason: String
        public var message: String
    }

    /// The longest header section (request line and headers), in bytes.
    public static let maximumHeaderBytes = 16 * 1024
    /// The largest body: a cover image, which senders send as one JPEG (`SET_PARAMETER`).
    public static let maximumBodyBytes = 4 * 1024 * 1024
    /// The most headers one request may carry.
    public static let maximumHeaderCount = RTSPHeaderSection.maximumHeaderCount

    private var buffer: [UInt8] = []
    private var pendingHead: (method: String, uri: String, version: String, headers: [(name: String, value: String)], length: Int)?

    public init() {}

    /// Bytes held that do not yet make a request.
    public var bufferedCount: Int { buffer.count }

    /// Adds bytes from the connection.
    public mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next whole request, nil if more bytes are needed.
    public mutating func next() throws(Refusal) -> RTSPRequest? {
        if pendingHead == nil {
            guard let end = RTSPHeaderSection.end(in: buffer) else {
                if buffer.count > Self.maximumHeaderBytes {
                    throw Refusal(status: 431, reason: "Request Header Fields Too Large",
                                  message: "a request's headers run past \(Self.maximumHeaderBytes) bytes")
                }
                return nil
            }
            guard end <= Self.maximumHeaderBytes else {
                throw Refusal(status: 431, reason: "Request Header Fields Too Large", message: "a request's headers run past \(Self.maximumHeaderBytes) bytes")
            }
            pendingHead = try Self.parseHead(buffer[..<end])
            buffer.removeFirst(end + 4)
        }
        guard let head = pendingHead, buffer.count >= head.length else { return nil }
        let body = Array(buffer[..<head.length])
        buffer.removeFirst(head.length)
        pendingHead = nil
        return RTSPRequest(method: head.method, uri: head.uri, version: head.version, headers: head.headers, body: body)
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>) throws(Refusal) -> (method: String, uri: String, version: String, headers: [(name: String, value: String)], length: Int) {
        func bad(_ message: String) -> Refusal { Refusal(status: 400, reason: "Bad Request", message: message) }
        let section: RTSPHeaderSection
        do {
            section = try RTSPHeaderSection(bytes, maximumBodyBytes: maximumBodyBytes)
        } catch {
            throw error.isBodyTooLarge ? Refusal(status: 413, reason: "Request Entity Too Large", message: error.message) : bad(error.message)
        }
        let parts = section.startLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0 == "_") }) else {
            throw bad("the request line \"\(section.startLine.prefix(64))\" is not METHOD URI VERSION")
        }
        let version = String(parts[2])
        guard version == "RTSP/1.0" || version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw Refusal(status: 505, reason: "RTSP Version Not Supported", message: "version \"\(version.prefix(32))\" is not RTSP/1.0")
        }
        return (String(parts[0]), String(parts[1]), version, section.headers, section.bodyLength)
    }
}

extension String {
    /// Without leading and trailing spaces and tabs, as bytes: a space followed by a combining
    /// mark is one Character to Swift, so a Character-wise trim kept it, and the request written
    /// out again read back with another value (found by fuzz-rtsp).
    var trimmingSpaces: String {
        let bytes = utf8
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start = bytes.index(after: start) }
        while start < end, bytes[bytes.index(before: end)] == 0x20 || bytes[bytes.index(before: end)] == 0x09 { end = bytes.index(before: end) }
        // Cut at ASCII bytes, so the rest is whole UTF-8.
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
