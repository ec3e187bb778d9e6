import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP/1.1 server over loopback that serves in-memory files, for testing and
/// benchmarking streaming clients against a network that can be slow, stall, fail or cut off
/// on demand, without depending on anything outside the process.
///
/// It listens on 127.0.0.1 with an ephemeral port and answers `GET` and `HEAD` with
/// `Content-Length`, `Content-Type` (guessed from the extension) and `Accept-Ranges: bytes`;
/// single byte ranges get `206` (or `416`); connections are kept alive when the client asks.
/// Misbehaviour is set up per path and consumed as it happens, so a client's retry sees a
/// healthy server again:
/// - `bandwidth` throttles every body byte of the server, across all connections together, like
///   one slow link (not fairly shared between connections).
/// - `addStall` pauses a body once it reaches a file offset.
/// - `failNext` answers the next requests with an error status.
/// - `cutConnection` closes the socket once a body reaches a file offset.
///
/// Thread safety: every method and property may be used from any thread or task, also while
/// requests are being served; changes apply to the next slice a connection sends (within about
/// 10 ms). Connections run on `group`'s event loops and only take a lock on shared state.
public final class MediaHTTPServer: Sendable {
    public let host: String
    public let port: Int
    let shared: Shared
    private let serverChannel: any Channel

    private init(serverChannel: any Channel, shared: Shared) throws {
        guard let port = serverChannel.localAddress?.port else {
            serverChannel.close(promise: nil)
            throw ServerError("bound socket has no port")
        }
        self.serverChannel = serverChannel
        self.shared = shared
        self.host = "127.0.0.1"
        self.port = port
    }

    // MARK: Lifecycle

    /// Starts serving `files` (request path such as "/a.wav" to contents).
    public static func start(files: [String: [UInt8]] = [:],
                             group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> MediaHTTPServer {
        let shared = Shared(files: files.mapValues { ByteBuffer(bytes: $0) })
        let channel = try await bootstrap(shared: shared, group: group).bind(host: "127.0.0.1", port: 0).get()
        return try MediaHTTPServer(serverChannel: channel, shared: shared)
    }

    /// Starts serving `files` given as `Data` or any other byte sequence.
    public static func start(files: [String: some Sequence<UInt8>],
                             group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> MediaHTTPServer {
        try await start(files: files.mapValues { Array($0) }, group: group)
    }

    /// `start` for callers outside async code, such as a benchmark's main thread.
    /// Must not be called on one of `group`'s event loops. `port` 0: any free one.
    public static func startBlocking(files: [String: [UInt8]] = [:], port: Int = 0,
                                     group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws -> MediaHTTPServer {
        let shared = Shared(files: files.mapValues { ByteBuffer(bytes: $0) })
        let channel = try bootstrap(shared: shared, group: group).bind(host: "127.0.0.1", port: port).wait()
        return try MediaHTTPServer(serverChannel: channel, shared: shared)
    }

    /// Stops listening and closes every connection, also those mid-response. On return the
    /// request log is final (cut-off responses show `.connectionClosed`) and stays readable.
    /// Calling it again does nothing.
    public func shutdown() async throws {
        shared.markShutDown()
        // `closeFuture`, not the close promise: that one completes before the handlers have
        // seen the channel go inactive, so the log could still be changing.
        serverChannel.close(promise: nil)
        try await serverChannel.closeFuture.get()
        for channel in shared.takeConnections() {
            channel.close(promise: nil)
            try await channel.closeFuture.get()
        }
    }

    /// `shutdown` for callers outside async code. Must not be called on an event loop.
    public func shutdownBlocking() throws {
        shared.markShutDown()
        serverChannel.close(promise: nil)
        try serverChannel.closeFuture.wait()
        for channel in shared.takeConnections() {
            channel.close(promise: nil)
            try channel.closeFuture.wait()
        }
    }

    private static func bootstrap(shared: Shared, group: any EventLoopGroup) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let id = shared.register(channel) else {
                        channel.close(promise: nil)
                        return
                    }
                    channel.closeFuture.whenComplete { _ in shared.unregister(id) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MediaHTTPConnectionHandler(shared: shared, connectionID: id))
                }
            }
    }

    // MARK: Files

    /// "http://127.0.0.1:PORT/path".
    public func url(for path: String) -> String {
        "http://\(host):\(port)\(path.hasPrefix("/") ? "" : "/")\(path)"
    }

    /// Adds or replaces a file; requests that start afterwards see the new contents (a response
    /// already being sent keeps the old ones), which is what a live playlist update looks like.
    /// - Parameter contentType: nil guesses from the extension (`contentType(forPath:)`).
    public func setFile(_ path: String, _ bytes: some Sequence<UInt8>, contentType: String? = nil) {
        let file = File(bytes: ByteBuffer(bytes: bytes), contentType: contentType)
        shared.state.withLock { $0.files[path] = file }
    }

    /// Later requests for `path` get 404.
    public func removeFile(_ path: String) {
        shared.state.withLock { $0.files[path] = nil }
    }

    /// Later requests for `path` are redirected to `location` (any URL, relative or not) with
    /// `status` (301, 302, 303, 307 or 308).
    public func setRedirect(_ path: String, to location: String, status: Int = 302) {
        shared.state.withLock { $0.redirects[path] = (location, status) }
    }

    /// The `Content-Type` served for a path without an explicit one.
    public static func contentType(forPath path: String) -> String {
        let name = path.split(separator: "?").first.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), !name[dot...].contains("/") else { return "application/octet-stream" }
        switch name[name.index(after: dot)...].lowercased() {
        case "mp3": return "audio/mpeg"
        case "flac": return "audio/flac"
        case "wav": return "audio/wav"
        case "m4a", "mp4", "m4b": return "audio/mp4"
        case "ogg", "oga", "opus": return "audio/ogg"
        case "aac": return "audio/aac"
        case "m3u8": return "application/vnd.apple.mpegurl"
        case "ts": return "video/mp2t"
        default: return "application/octet-stream"
        }
    }

    // MARK: Misbehaviour

    /// Body bytes per second for the whole server, shared by all connections; nil is
    /// unlimited. Changing it affects responses already being sent.
    public var bandwidth: Int? {
        get { shared.state.withLock { $0.bandwidth } }
        set {
            precondition(newValue.map { $0 > 0 } ?? true, "MediaHTTPServer: bandwidth must be positive")
            shared.state.withLock { s in
                s.bandwidth = newValue
                // A lower limit must not start with a burst saved up under the old one.
                if let newValue { s.allowance = min(s.allowance, Shared.burstAllowance(bandwidth: newValue)) }
            }
        }
    }

    /// The first response body for `path` that reaches file offset `afterByte` (that many bytes
    /// of the file before it) sends nothing more for `seconds`, then continues on the same
    /// connection. Fires once, so a client that retries is not stalled again.
    public func addStall(path: String, afterByte offset: Int, seconds: Double) {
        precondition(offset >= 0 && seconds >= 0, "MediaHTTPServer: negative stall")
        shared.state.withLock { $0.rules.append(Rule(path: path, offset: offset, action: .stall(.nanoseconds(Int64(seconds * 1e9))))) }
    }

    /// The next `count` requests for `path` (HEAD included, whether or not the file exists) get
    /// `status` with an empty body.
    /// Replaces an earlier failure rule for the path.
    public func failNext(path: String, count: Int = 1, status: Int) {
        precondition(count >= 0 && (100...599).contains(status), "MediaHTTPServer: bad failure rule")
        shared.state.withLock { $0.failures[path] = count == 0 ? nil : Failure(status: status, remaining: count) }
    }

    /// The first response body for `path` that reaches file offset `afterByte` closes the
    /// connection there, after the bytes before it were sent: a truncated transfer. A GET of the
    /// whole file then delivers exactly `afterByte` body bytes. Fires once.
    public func cutConnection(path: String, afterByte offset: Int) {
        precondition(offset >= 0, "MediaHTTPServer: negative cut offset")
        shared.state.withLock { $0.rules.append(Rule(path: path, offset: offset, action: .cut)) }
    }

    /// Stall and cut rules that have not fired yet.
    public var pendingRuleCount: Int { shared.state.withLock { $0.rules.count { !$0.fired } } }

    /// Drops stall, cut and failure rules that have not fired yet.
    public func removeAllMisbehaviour() {
        shared.state.withLock { s in
            s.rules.removeAll()
            s.failures.removeAll()
        }
    }

    // MARK: Log

    /// Every request so far, in arrival order.
    public var requests: [RequestRecord] { shared.state.withLock { $0.log } }

    /// The requests for one path, in arrival order.
    public func requests(for path: String) -> [RequestRecord] {
        shared.state.withLock { $0.log.filter { $0.path == path } }
    }

    /// Body bytes written to connections over the server's life.
    public var totalBodyBytesSent: Int { shared.state.withLock { $0.totalBodyBytesSent } }

    /// Connections accepted over the server's life.
    public var connectionCount: Int { shared.state.withLock { $0.nextConnectionID } }
}

// MARK: - Shared state

extension MediaHTTPServer {
    struct File: Sendable {
        var bytes: ByteBuffer
        var contentType: String?
    }

    struct Rule: Sendable {
        enum Action: Sendable { case stall(TimeAmount), cut }
        var path: String
        var offset: Int
        var action: Action
        var fired = false
    }

    struct Failure: Sendable {
        var status: Int
        var remaining: Int
    }

    struct State: Sendable {
        var files: [String: File]
        var bandwidth: Int?
        /// Token bucket for `bandwidth`, shared by all connections.
        var allowance: Double = 0
        var refilledAt = NIODeadline.now()
        var rules: [Rule] = []
        var failures: [String: Failure] = [:]
        var redirects: [String: (location: String, status: Int)] = [:]
        var log: [RequestRecord] = []
        var totalBodyBytesSent = 0
        var connections: [Int: any Channel] = [:]
        var nextConnectionID = 0
        var isShutDown = false
    }

    /// What a connection does next with its response body.
    enum Step {
        case send(Int)
        /// Out of bandwidth: try again on the next tick.
        case wait
        case stall(TimeAmount)
        case cut
    }

    /// How to answer one request, decided in one critical section so failure counters, the
    /// file and the log entry agree.
    struct Answer {
        var head: HTTPResponseHead
        var record: Int
        /// The whole file and the part of it to send; nil for a response without a body.
        var body: (file: ByteBuffer, range: Range<Int>)?
    }

    /// The state the server object and its connection handlers share.
    final class Shared: Sendable {
        let state: Mutex<State>

        init(files: [String: ByteBuffer]) {
            state = Mutex(State(files: files.mapValues { File(bytes: $0, contentType: nil) }))
        }

        /// How much unused bandwidth a quiet period may save up: enough to ride out late
        /// timer ticks, small enough that a throttled transfer never starts with a big burst.
        static func burstAllowance(bandwidth: Int) -> Double { max(Double(bandwidth) * 0.05, 1) }

        func register(_ channel: any Channel) -> Int? {
            state.withLock { s in
                guard !s.isShutDown else { return nil }
                let id = s.nextConnectionID
                s.nextConnectionID += 1
                s.connections[id] = channel
                return id
            }
        }

        func unregister(_ id: Int) {
            state.withLock { _ = $0.connections.removeValue(forKey: id) }
        }

        func markShutDown() {
            state.withLock { $0.isShutDown = true }
        }

        func takeConnections() -> [any Channel] {
            state.withLock { s in
                let channels = Array(s.connections.values)
                s.connections = [:]
                return channels
            }
        }

        func answer(_ request: HTTPRequestHead, path: String, connectionID: Int) -> Answer {
            let rangeHeader = request.headers.first(name: "range")
            return state.withLock { s in
                func record(_ status: HTTPResponseStatus, bodyBytes: Int = 0, outcome: RequestRecord.Outcome) -> Int {
                    s.log.append(RequestRecord(connectionID: connectionID, method: request.method.rawValue, path: path,
                                               target: request.uri, range: rangeHeader, status: Int(status.code),
                                               bodyBytesSent: bodyBytes, outcome: outcome))
                    return s.log.count - 1
                }
                func empty(_ status: HTTPResponseStatus, _ extra: [(String, String)] = []) -> Answer {
                    let headers = HTTPHeaders([("Content-Length", "0")] + extra)
                    return Answer(head: HTTPResponseHead(version: request.version, status: status, headers: headers),
                                  record: record(status, outcome: .completed), body: nil)
                }

                if var failure = s.failures[path] {
                    failure.remaining -= 1
                    s.failures[path] = failure.remaining > 0 ? failure : nil
                    return empty(HTTPResponseStatus(statusCode: failure.status))
                }
                guard request.method == .GET || request.method == .HEAD else {
                    return empty(.methodNotAllowed, [("Allow", "GET, HEAD")])
                }
                if let redirect = s.redirects[path] {
                    return empty(HTTPResponseStatus(statusCode: redirect.status), [("Location", redirect.location)])
                }
                guard let file = s.files[path] else { return empty(.notFound) }

                let length = file.bytes.readableBytes
                var headers = HTTPHeaders([
                    ("Accept-Ranges", "bytes"),
                    ("Content-Type", file.contentType ?? MediaHTTPServer.contentType(forPath: path)),
                ])
                let status: HTTPResponseStatus
                let range: Range<Int>
                switch ByteRangeRequest(header: rangeHeader, length: length) {
                case .whole:
                    status = .ok
                    range = 0..<length
                case .part(let part):
                    status = .partialContent
                    range = part
                    headers.add(name: "Content-Range", value: "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(length)")
                case .unsatisfiable:
                    return empty(.rangeNotSatisfiable, [("Content-Range", "bytes */\(length)")])
                }
                headers.add(name: "Content-Length", value: String(range.count))
                let head = HTTPResponseHead(version: request.version, status: status, headers: headers)
                if request.method == .HEAD || range.isEmpty {
                    return Answer(head: head, record: record(status, outcome: .completed), body: nil)
                }
                return Answer(head: head, record: record(status, outcome: .inProgress), body: (file.bytes, range))
            }
        }

        /// Decides the next slice of a body now at file offset `position` (exclusive `end`),
        /// firing a rule that sits exactly there and otherwise stopping short of the next one,
        /// and counts the bytes it lets through as sent.
        func nextStep(record: Int, path: String, position: Int, end: Int, maximum: Int) -> Step {
            state.withLock { s in
                var count = min(end - position, maximum)
                for index in s.rules.indices where !s.rules[index].fired && s.rules[index].path == path {
                    let offset = s.rules[index].offset
                    if offset == position {
                        s.rules[index].fired = true
                        switch s.rules[index].action {
                        case .stall(let duration): return .stall(duration)
                        case .cut: return .cut
                        }
                    }
                    if offset > position && offset < end { count = min(count, offset - position) }
                }
                if let bandwidth = s.bandwidth {
                    let now = NIODeadline.now()
                    let elapsed = Double((now - s.refilledAt).nanoseconds) / 1e9
                    s.refilledAt = now
                    s.allowance = min(s.allowance + Double(bandwidth) * elapsed, Self.burstAllowance(bandwidth: bandwidth))
                    // Waiting for a reasonable slice keeps a connection from spinning on the few
                    // bytes that trickle in between two calls; half a tick's worth tolerates
                    // timers that fire a little early.
                    let worthSending = min(count, max(bandwidth / 200, 1))
                    guard Int(s.allowance) >= worthSending else { return .wait }
                    count = min(count, Int(s.allowance))
                    s.allowance -= Double(count)
                }
                s.log[record].bodyBytesSent += count
                s.totalBodyBytesSent += count
                return .send(count)
            }
        }

        func finish(record: Int, _ outcome: RequestRecord.Outcome) {
            state.withLock { $0.log[record].outcome = outcome }
        }
    }
}
