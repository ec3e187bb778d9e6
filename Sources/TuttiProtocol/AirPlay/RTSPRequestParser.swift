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
    public static let maximumHeaderCount = 64

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
            guard let end = Self.headerEnd(in: buffer) else {
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

    /// The index of the blank line (`\r\n\r\n`) that ends the header section.
    private static func headerEnd(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 0
        while index + 3 < bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>) throws(Refusal) -> (method: String, uri: String, version: String, headers: [(name: String, value: String)], length: Int) {
        func bad(_ message: String) -> Refusal { Refusal(status: 400, reason: "Bad Request", message: message) }
        // Lines end in CRLF; a bare LF inside is refused rather than guessed at.
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == 13 {
                guard index + 1 < bytes.endIndex, bytes[index + 1] == 10 else { throw bad("a bare CR in the headers") }
                lines.append(bytes[start..<index])
                index += 2
                start = index
                continue
            }
            guard bytes[index] != 10 else { throw bad("a bare LF in the headers") }
            guard bytes[index] >= 32 || bytes[index] == 9, bytes[index] != 127 else { throw bad("a control byte (\(bytes[index])) in the headers") }
            index += 1
        }
        lines.append(bytes[start..<bytes.endIndex])
        guard let requestLine = lines.first, let text = String(validating: requestLine, as: UTF8.self) else {
            throw bad("the request line is not UTF-8")
        }
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0 == "_") }) else {
            throw bad("the request line \"\(text.prefix(64))\" is not METHOD URI VERSION")
        }
        let version = String(parts[2])
        guard version == "RTSP/1.0" || version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw Refusal(status: 505, reason: "RTSP Version Not Supported", message: "version \"\(version.prefix(32))\" is not RTSP/1.0")
        }
        var headers: [(name: String, value: String)] = []
        var length = 0
        var sawLength = false
        for line in lines.dropFirst() {
            guard headers.count < maximumHeaderCount else { throw bad("more than \(maximumHeaderCount) headers") }
            guard let colon = line.firstIndex(of: 58) else { throw bad("a header line without a colon") }
            guard let name = String(validating: line[line.startIndex..<colon], as: UTF8.self),
                  let rawValue = String(validating: line[(colon + 1)...], as: UTF8.self) else { throw bad("a header that is not UTF-8") }
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else { throw bad("a header name \"\(name.prefix(32))\" with spaces") }
            let value = rawValue.trimmingSpaces
            if name.lowercased() == "content-length" {
                guard !sawLength else { throw bad("two Content-Length headers") }
                guard let count = Int(value), count >= 0, value.allSatisfy(\.isNumber) else { throw bad("Content-Length \"\(value.prefix(32))\" is not a number") }
                guard count <= maximumBodyBytes else {
                    throw Refusal(status: 413, reason: "Request Entity Too Large", message: "a body of \(count) bytes, over \(maximumBodyBytes)")
                }
                length = count
                sawLength = true
            }
            headers.append((name, value))
        }
        return (String(parts[0]), String(parts[1]), version, headers, length)
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
