import Foundation
import Glibc
import Testing
import TuttiSimulation
import TuttiTestSupport

/// `MediaHTTPServer` checked over real loopback sockets with a raw client, so what is asserted is
/// exactly the bytes and timing a streaming client would see.
@Suite struct MediaHTTPServerTests {
    /// Bytes that differ from their neighbours, so a slice from the wrong offset cannot match.
    static func pattern(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for i in 0..<count { buffer[i] = UInt8(truncatingIfNeeded: i &* 7 &+ i / 251) }
            initialized = count
        }
    }

    @Test func getServesTheWholeFile() async throws {
        let file = Self.pattern(100_000)
        let server = try await MediaHTTPServer.start(files: ["/a.wav": file])
        let response = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/a.wav")
            return try connection.readResponse()
        }
        #expect(response.status == 200)
        #expect(response.body == file)
        #expect(response.headers["content-length"] == "100000")
        #expect(response.headers["content-type"] == "audio/wav")
        #expect(response.headers["accept-ranges"] == "bytes")
        #expect(server.url(for: "/a.wav") == "http://127.0.0.1:\(server.port)/a.wav")
        #expect(server.totalBodyBytesSent == file.count)
        try await server.shutdown()
    }

    @Test func headAnswersHeadersWithoutABody() async throws {
        let file = Self.pattern(5_000)
        let server = try await MediaHTTPServer.start(files: ["/list.m3u8": file])
        let (head, get) = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("HEAD", "/list.m3u8")
            let head = try connection.readResponse(isHead: true)
            // A body after the HEAD response would show up as garbage before this one.
            try connection.send("GET", "/list.m3u8")
            return (head, try connection.readResponse())
        }
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "5000")
        #expect(head.headers["content-type"] == "application/vnd.apple.mpegurl")
        #expect(head.body.isEmpty)
        #expect(get.status == 200)
        #expect(get.body == file)
        #expect(server.requests.map(\.method) == ["HEAD", "GET"])
        #expect(server.requests.map(\.bodyBytesSent) == [0, 5_000])
        try await server.shutdown()
    }

    @Test func contentTypesFollowTheExtension() {
        let expected = [
            "/a.mp3": "audio/mpeg", "/a.flac": "audio/flac", "/a.wav": "audio/wav", "/a.m4a": "audio/mp4",
            "/a.ogg": "audio/ogg", "/a.aac": "audio/aac", "/live/index.m3u8": "application/vnd.apple.mpegurl",
            "/seg/1.ts": "video/mp2t", "/a.bin": "application/octet-stream", "/dir.x/noext": "application/octet-stream",
        ]
        for (path, type) in expected {
            #expect(MediaHTTPServer.contentType(forPath: path) == type, "\(path)")
        }
    }

    @Test func rangesOnOneKeptAliveConnection() async throws {
        let file = Self.pattern(10_000)
        let server = try await MediaHTTPServer.start(files: ["/a.flac": file])
        let responses = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            var responses: [RawResponse] = []
            for range in ["bytes=100-199", "bytes=9000-", "bytes=-10", "bytes=9990-20000", "bytes=10000-", "bytes=-0"] {
                try connection.send("GET", "/a.flac", headers: ["Range": range])
                responses.append(try connection.readResponse())
            }
            return responses
        }
        #expect(responses.map(\.status) == [206, 206, 206, 206, 416, 416])
        #expect(responses[0].body == Array(file[100..<200]))
        #expect(responses[0].headers["content-range"] == "bytes 100-199/10000")
        #expect(responses[0].headers["content-length"] == "100")
        #expect(responses[1].body == Array(file[9_000...]))
        #expect(responses[1].headers["content-range"] == "bytes 9000-9999/10000")
        #expect(responses[2].body == Array(file[9_990...]))
        #expect(responses[2].headers["content-range"] == "bytes 9990-9999/10000")
        #expect(responses[3].body == Array(file[9_990...]))
        #expect(responses[4].headers["content-range"] == "bytes */10000")
        #expect(responses[4].body.isEmpty)
        let log = server.requests
        #expect(log.map(\.range) == ["bytes=100-199", "bytes=9000-", "bytes=-10", "bytes=9990-20000", "bytes=10000-", "bytes=-0"])
        #expect(Set(log.map(\.connectionID)).count == 1)
        #expect(server.connectionCount == 1)
        try await server.shutdown()
    }

    @Test func unknownPathIsNotFound() async throws {
        let server = try await MediaHTTPServer.start()
        let response = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/missing.mp3?x=1")
            return try connection.readResponse()
        }
        #expect(response.status == 404)
        #expect(server.requests.first?.path == "/missing.mp3")
        #expect(server.requests.first?.target == "/missing.mp3?x=1")
        try await server.shutdown()
    }

    @Test func bandwidthPacesTheBody() async throws {
        let count = 150_000, bandwidth = 300_000
        let file = Self.pattern(count)
        let server = try await MediaHTTPServer.start(files: ["/slow.mp3": file])
        server.bandwidth = bandwidth
        let (response, elapsed) = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            let start = ContinuousClock.now
            try connection.send("GET", "/slow.mp3")
            let response = try connection.readResponse()
            return (response, ContinuousClock.now - start)
        }
        #expect(response.body == file)
        #expect(elapsed >= .seconds(0.7 * Double(count) / Double(bandwidth)), "took \(elapsed)")
        try await server.shutdown()
    }

    @Test func bandwidthIsSharedByAllConnections() async throws {
        let count = 60_000, bandwidth = 300_000
        let file = Self.pattern(count)
        let server = try await MediaHTTPServer.start(files: ["/a.mp3": file, "/b.mp3": file])
        server.bandwidth = bandwidth
        let start = ContinuousClock.now
        async let a = offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/a.mp3")
            return try connection.readResponse().body
        }
        async let b = offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/b.mp3")
            return try connection.readResponse().body
        }
        let bodies = try await [a, b]
        let elapsed = ContinuousClock.now - start
        #expect(bodies == [file, file])
        #expect(elapsed >= .seconds(0.7 * Double(2 * count) / Double(bandwidth)), "took \(elapsed)")
        #expect(server.connectionCount == 2)
        try await server.shutdown()
    }

    @Test func bandwidthChangesWhileServing() async throws {
        // At the starting rate this would take 50 s; lifting the limit mid-body must finish it.
        let file = Self.pattern(1_000_000)
        let server = try await MediaHTTPServer.start(files: ["/big.flac": file])
        server.bandwidth = 20_000
        let response = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/big.flac")
            return try connection.readResponse { received in
                if received >= 2_000 && server.bandwidth != nil { server.bandwidth = nil }
            }
        }
        #expect(response.body == file)
        #expect(server.requests.first?.outcome == .completed)
        try await server.shutdown()
    }

    @Test func stallPausesAtTheOffsetOnce() async throws {
        let file = Self.pattern(200_000)
        let offset = 50_000, seconds = 0.5
        let server = try await MediaHTTPServer.start(files: ["/s.mp3": file])
        server.addStall(path: "/s.mp3", afterByte: offset, seconds: seconds)
        #expect(server.pendingRuleCount == 1)
        let response = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/s.mp3")
            return try connection.readResponse()
        }
        #expect(response.body == file)
        let reached = try #require(response.arrivals.first { $0.bytes >= offset })
        #expect(reached.bytes == offset, "the body ran past the stall offset before pausing")
        let resumed = try #require(response.arrivals.first { $0.bytes > offset })
        #expect(resumed.at - reached.at >= .seconds(seconds * 0.9), "gap \(resumed.at - reached.at)")
        #expect(server.pendingRuleCount == 0)
        try await server.shutdown()
    }

    @Test func failNextAnswersTheStatusThenServes() async throws {
        let file = Self.pattern(1_000)
        let server = try await MediaHTTPServer.start(files: ["/f.ogg": file])
        server.failNext(path: "/f.ogg", count: 2, status: 503)
        server.failNext(path: "/gone.ogg", count: 1, status: 500)
        let responses = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            var responses: [RawResponse] = []
            for path in ["/f.ogg", "/f.ogg", "/f.ogg", "/gone.ogg", "/gone.ogg"] {
                try connection.send("GET", path)
                responses.append(try connection.readResponse())
            }
            return responses
        }
        #expect(responses.map(\.status) == [503, 503, 200, 500, 404])
        #expect(responses[2].body == file)
        #expect(server.requests.map(\.status) == [503, 503, 200, 500, 404])
        try await server.shutdown()
    }

    @Test func cutConnectionTruncatesOnceAndARetryResumes() async throws {
        let file = Self.pattern(100_000)
        let cut = 30_000
        let server = try await MediaHTTPServer.start(files: ["/c.m4a": file])
        server.cutConnection(path: "/c.m4a", afterByte: cut)
        let (first, retry) = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/c.m4a")
            let first = try connection.readResponse()
            let again = try RawHTTPConnection(port: server.port)
            try again.send("GET", "/c.m4a", headers: ["Range": "bytes=\(first.body.count)-"])
            return (first, try again.readResponse())
        }
        #expect(first.status == 200)
        #expect(first.headers["content-length"] == "100000")
        #expect(first.endedEarly)
        #expect(first.body == Array(file[..<cut]))
        #expect(retry.status == 206)
        #expect(retry.body == Array(file[cut...]))
        let log = server.requests
        #expect(log.map(\.outcome) == [.cut, .completed])
        #expect(log.map(\.bodyBytesSent) == [cut, file.count - cut])
        #expect(log[0].connectionID != log[1].connectionID)
        #expect(server.totalBodyBytesSent == file.count)
        try await server.shutdown()
    }

    @Test func filesChangeWhileServing() async throws {
        let server = try await MediaHTTPServer.start(files: ["/live.m3u8": Data("#EXTM3U\n#1\n".utf8)])
        let first = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/live.m3u8")
            return try connection.readResponse()
        }
        server.setFile("/live.m3u8", Data("#EXTM3U\n#1\n#2\n".utf8))
        server.setFile("/raw", [1, 2, 3], contentType: "audio/mpeg")
        let (second, raw) = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/live.m3u8")
            let second = try connection.readResponse()
            try connection.send("GET", "/raw")
            return (second, try connection.readResponse())
        }
        #expect(String(decoding: first.body, as: UTF8.self) == "#EXTM3U\n#1\n")
        #expect(String(decoding: second.body, as: UTF8.self) == "#EXTM3U\n#1\n#2\n")
        #expect(raw.body == [1, 2, 3])
        #expect(raw.headers["content-type"] == "audio/mpeg")
        try await server.shutdown()
    }

    @Test func connectionCloseIsHonoured() async throws {
        let server = try await MediaHTTPServer.start(files: ["/a.wav": Self.pattern(10)])
        let (response, closed) = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/a.wav", headers: ["Connection": "close"])
            let response = try connection.readResponse()
            return (response, try connection.isClosedByPeer())
        }
        #expect(response.status == 200)
        #expect(response.headers["connection"] == "close")
        #expect(closed)
        try await server.shutdown()
    }

    @Test func shutdownEndsAResponseInFlight() async throws {
        let file = Self.pattern(100_000)
        let server = try await MediaHTTPServer.start(files: ["/a.wav": file])
        server.bandwidth = 20_000
        let response = try await offThread {
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/a.wav")
            return try connection.readResponse { received in
                if received >= 1_000 { try? server.shutdownBlocking() }
            }
        }
        #expect(response.endedEarly)
        #expect(response.body == Array(file[..<response.body.count]))
        #expect(server.requests.map(\.outcome) == [.connectionClosed])
        try await server.shutdown()
    }

    @Test func blockingStartAndShutdown() async throws {
        let file = Self.pattern(1_000)
        let (body, refused) = try await offThread {
            // On a port below the kernel's ephemeral range (32768 on): a port freed there is not
            // handed to another test's listener on port 0 in the same process, which once made
            // the connection after the shutdown succeed (CI, beside the AirPlay tests).
            var server: MediaHTTPServer?
            for port in (20_000..<32_000).shuffled().prefix(64) where server == nil {
                server = try? MediaHTTPServer.startBlocking(files: ["/b.wav": file], port: port)
            }
            guard let server else { throw TestFailure("no free port below the ephemeral range among 64 tried") }
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send("GET", "/b.wav")
            let body = try connection.readResponse().body
            try server.shutdownBlocking()
            try server.shutdownBlocking()
            let refused = (try? RawHTTPConnection(port: server.port)) == nil
            return (body, refused)
        }
        #expect(body == file)
        #expect(refused)
    }
}

// MARK: - A raw HTTP/1.1 client

/// Runs blocking socket work on its own thread, off the cooperative pool, bounded.
private func offThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onOwnThread("a socket exchange", timeout: .seconds(120), body)
}

private struct RawResponse: Sendable {
    var status = 0
    /// Lowercased names.
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    /// Body bytes received so far after each read from the socket, and when.
    var arrivals: [(bytes: Int, at: ContinuousClock.Instant)] = []
    /// The connection closed before `Content-Length` bytes arrived.
    var endedEarly = false
}

private struct RawHTTPError: Error, CustomStringConvertible {
    let description: String
}

/// A blocking HTTP/1.1 client on one socket: requests are written as text, responses read with
/// `Content-Length` framing only (all `MediaHTTPServer` sends). The receive timeout only guards
/// against a hung test.
private final class RawHTTPConnection {
    private let socket: Int32
    /// Received and not yet consumed: `buffer[consumed..<filled]`.
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var consumed = 0
    private var filled = 0

    init(port: Int, receiveTimeoutSeconds: Int = 20) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw RawHTTPError(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            // Not closed here: a class whose stored properties are all set runs its deinit when
            // its initializer throws, and a second close could take a descriptor another test
            // (an event loop's socket) has been given meanwhile.
            throw RawHTTPError(description: "connect: errno \(errno)")
        }
    }

    deinit { close(socket) }

    func send(_ method: String, _ target: String, headers: [String: String] = [:]) throws {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw RawHTTPError(description: "send: errno \(errno)") }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Reads one response. `progress` sees the body byte count after each read.
    func readResponse(isHead: Bool = false, progress: (Int) -> Void = { _ in }) throws -> RawResponse {
        var response = RawResponse()
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = buffer[consumed..<filled].firstRange(of: separator)?.upperBound
            if headEnd == nil, try !receive() { throw RawHTTPError(description: "connection closed inside the response head") }
        }
        let head = String(decoding: buffer[consumed..<headEnd!], as: UTF8.self)
        consumed = headEnd!
        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw RawHTTPError(description: "bad status line \(head)") }
        response.status = status
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            response.headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = isHead ? 0 : Int(response.headers["content-length"] ?? "0") ?? 0
        response.body.reserveCapacity(length)
        while true {
            let take = min(length - response.body.count, filled - consumed)
            if take > 0 {
                response.body += buffer[consumed..<(consumed + take)]
                consumed += take
                response.arrivals.append((response.body.count, .now))
                progress(response.body.count)
            }
            if response.body.count == length { break }
            guard try receive() else {
                response.endedEarly = true
                break
            }
        }
        return response
    }

    /// Whether the server closed the connection, with nothing more sent.
    func isClosedByPeer() throws -> Bool {
        consumed == filled ? try !receive() : false
    }

    /// False at end of stream.
    private func receive() throws -> Bool {
        if consumed == filled {
            consumed = 0
            filled = 0
        } else if filled == buffer.count {
            // Only a response head can fill the buffer: make room for the rest of it.
            if consumed > 0 {
                buffer.removeSubrange(..<consumed)
                buffer += repeatElement(0, count: consumed)
                filled -= consumed
                consumed = 0
            } else {
                buffer += repeatElement(0, count: buffer.count)
            }
        }
        var count: Int
        // A signal handled on this thread interrupts the wait (seen once, with every other
        // suite running beside this one): not an error, so waited again.
        repeat {
            count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress! + filled, $0.count - filled, 0) }
        } while count < 0 && errno == EINTR
        if count < 0 { throw RawHTTPError(description: "recv: errno \(errno)") }
        filled += count
        return count > 0
    }
}
