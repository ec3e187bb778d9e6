/// What RTSP requests and responses share: headers, whose names are matched without regard to
/// case, the first of a repeated one counting.
public protocol RTSPMessage {
    var headers: [(name: String, value: String)] { get }
}

extension RTSPMessage {
    public subscript(header name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// One RTSP request, as AirPlay senders send them (RTSP/1.0 over TCP, HTTP-like): a request
/// line, headers, and a body of `Content-Length` bytes.
public struct RTSPRequest: RTSPMessage, Sendable, Equatable {
    public var method: String
    public var uri: String
    /// `RTSP/1.0`, or `HTTP/1.1` for the few requests AirPlay sends as HTTP on the same
    /// connection (`POST /auth-setup`).
    public var version: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String, uri: String, version: String = "RTSP/1.0", headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.uri = uri
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// The bytes on the wire (what a sender writes; `RTSPRequestParser` reads them back).
    public var encoded: [UInt8] {
        var text = "\(method) \(uri) \(version)\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// A `text/parameters` body (`volume: -11.5`, `progress: a/b/c`), one `name: value` a
    /// line, each trimmed of spaces; a line without a colon is skipped. Lines end in CR, LF or
    /// CRLF (to Swift, CRLF is one Character, neither CR nor LF: a body of `volume: -20.0\r\n`
    /// read as the value `-20.0\r\n`, and was refused, until an AirPlay room's test sent one).
    public static func textParameters(_ body: [UInt8]) -> [(name: String, value: String)] {
        String(decoding: body, as: UTF8.self).split(whereSeparator: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" }).compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]).trimmingSpaces, String(line[colon...].dropFirst()).trimmingSpaces)
        }
    }

    /// The `CSeq` the reply must echo; nil if absent.
    public var sequence: String? { self[header: "CSeq"] }

    public static func == (lhs: RTSPRequest, rhs: RTSPRequest) -> Bool {
        lhs.method == rhs.method && lhs.uri == rhs.uri && lhs.version == rhs.version && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// A reply to an `RTSPRequest`.
public struct RTSPResponse: RTSPMessage, Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var version: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, reason: String, version: String = "RTSP/1.0", headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// The bytes on the wire; `Content-Length` is added for a body.
    public var encoded: [UInt8] {
        var text = "\(version) \(status) \(reason)\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        if !body.isEmpty && self[header: "Content-Length"] == nil { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    public static func == (lhs: RTSPResponse, rhs: RTSPResponse) -> Bool {
        lhs.encoded == rhs.encoded
    }
}
