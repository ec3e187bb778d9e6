/// Reads RTSP responses from a TCP byte stream, incrementally, as a sender reads a receiver's
/// replies: bytes go in as they arrive, whole responses come out. A receiver is a peer on the
/// network, so nothing is trusted: a malformed status line or header, a header section past
/// `maximumHeaderBytes`, a body over `maximumBodyBytes`, each is a `Failure` naming what was
/// wrong (the connection's framing is lost after it; the sender closes it).
public struct RTSPResponseParser: Sendable {
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Replies are small (a receiver sends no cover art back): 16 KiB of headers, 64 KiB of body.
    public static let maximumHeaderBytes = 16 * 1024
    public static let maximumBodyBytes = 64 * 1024

    private var buffer: [UInt8] = []
    private var pendingHead: (status: Int, reason: String, version: String, headers: [(name: String, value: String)], length: Int)?

    public init() {}

    /// Bytes held that do not yet make a response.
    public var bufferedCount: Int { buffer.count }

    public mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next whole response, nil if more bytes are needed.
    public mutating func next() throws(Failure) -> RTSPResponse? {
        if pendingHead == nil {
            guard let end = RTSPHeaderSection.end(in: buffer) else {
                if buffer.count > Self.maximumHeaderBytes { throw Failure(message: "a reply's headers run past \(Self.maximumHeaderBytes) bytes") }
                return nil
            }
            guard end <= Self.maximumHeaderBytes else { throw Failure(message: "a reply's headers run past \(Self.maximumHeaderBytes) bytes") }
            let section: RTSPHeaderSection
            do {
                section = try RTSPHeaderSection(buffer[..<end], maximumBodyBytes: Self.maximumBodyBytes)
            } catch {
                throw Failure(message: error.message)
            }
            // RTSP/1.0 200 OK — the reason may hold spaces, or be empty.
            let parts = section.startLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0] == "RTSP/1.0" || parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0",
                  // Three digits, the first not 0 (RTSP's 100–599 and its kin): "061" would read as 61
                  // and be written back as "61" (found by fuzz-rtsp).
                  parts[1].count == 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), parts[1].first != "0", let status = Int(parts[1]) else {
                throw Failure(message: "the status line \"\(section.startLine.prefix(64))\" is not VERSION STATUS REASON")
            }
            pendingHead = (status, parts.count > 2 ? String(parts[2]) : "", String(parts[0]), section.headers, section.bodyLength)
            buffer.removeFirst(end + 4)
        }
        guard let head = pendingHead, buffer.count >= head.length else { return nil }
        let body = Array(buffer[..<head.length])
        buffer.removeFirst(head.length)
        pendingHead = nil
        return RTSPResponse(status: head.status, reason: head.reason, version: head.version, headers: head.headers, body: body)
    }
}
