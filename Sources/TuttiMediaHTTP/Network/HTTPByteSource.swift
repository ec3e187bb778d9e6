import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TuttiCore
import TuttiMedia

/// An HTTP(S) resource read as a progressive download through AsyncHTTPClient: bytes stream in
/// at network speed into a `ByteSpanCache` while the decoder reads behind them.
///
/// - Seeking: a read far from the bytes held (FFmpeg seeking in a file, or probing its end)
///   starts a range request at that offset; the bytes already downloaded stay usable.
/// - Retries: a refused connection, a 5xx/408/429 answer, or a transfer that breaks off is
///   retried with exponential backoff (`Configuration.retryDelays`), resuming with a range
///   request where the bytes stopped, so nothing is lost or repeated. The backoff resets once
///   bytes flow again. A 4xx answer is final.
/// - Internet radio: with `requestsICYMetadata`, a stream that answers with `icy-metaint` has
///   its in-band titles removed from the audio and reported through `onTitle`.
///
/// Thread-safety: `read` is called by one reading thread and blocks it; all other members may
/// be called from any thread. Callbacks run on AsyncHTTPClient's tasks; keep them quick.
public final class HTTPByteSource: MediaByteSource, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Waits before each retry of a failed transfer; their count is the retry budget.
        public var retryDelays: [Duration] = [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4)]
        /// Time allowed from request to response head.
        public var responseTimeout: Duration = .seconds(10)
        /// Ask internet radio servers for in-band titles (`Icy-MetaData: 1`).
        public var requestsICYMetadata = true
        /// A read this far (bytes) past where the current transfer has reached waits for it;
        /// further, a new range request starts at the read offset.
        public var seekThresholdBytes: Int64 = 512 * 1024
        /// For streams of unknown length (radio), bytes kept behind the reader.
        public var liveWindowBytes: Int64 = 4 * 1024 * 1024
        /// Which URLs and redirect targets are fetched (`URLPolicy`).
        public var urlPolicy = URLPolicy.open
        public init() {}
    }

    /// What the transfer is doing, for events.
    public typealias Event = NetworkInputEvent

    public let name: String
    public let url: String
    public let configuration: Configuration
    /// Called on a network task for retries and radio titles; set before `open`.
    public var onEvent: (@Sendable (Event) -> Void)?

    private let client: HTTPClient
    /// Times arrivals, for the arrival rate.
    private let clock: any HostClock
    /// Transfers run here, not on the cooperative pool: the reader blocks a thread until they
    /// bring its bytes (`NetworkTaskExecutor`).
    private let executor = NetworkTaskExecutor(label: "http")
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var cache = ByteSpanCache()
    private var totalLength: Int64?
    private var endOfBody: Int64?
    private var acceptsRanges = true
    private var isLive = false
    private var headReceived = false
    private var failure: MediaError?
    private var cancelled = false
    private var transfer: Transfer?
    private var generation = 0
    private var arrivals: [(time: Int64, bytes: Int)] = []
    private var readerPosition: Int64 = 0
    private var retries = 0

    private struct Transfer {
        var generation: Int
        var position: Int64
        var startTime: Int64
        var task: Task<Void, Never>?
    }

    public init(url: String, configuration: Configuration = Configuration(), client: HTTPClient, clock: any HostClock) {
        self.name = url
        self.url = url
        self.configuration = configuration
        self.client = client
        self.clock = clock
    }

    deinit { cancel() }

    /// Starts the download and waits for the response head (retrying as configured). Throws a
    /// one-line error naming the URL: unreachable, HTTP status, or cancelled.
    public func open() throws(MediaError) {
        condition.lock()
        defer { condition.unlock() }
        startTransfer(at: 0)
        while !headReceived && failure == nil && !cancelled { condition.wait() }
        if let failure { throw failure }
        if cancelled { throw MediaError(.cancelled, input: url, reason: "cancelled") }
    }

    public var length: Int64? { condition.withLock { totalLength ?? endOfBody } }
    public var isSeekable: Bool { condition.withLock { acceptsRanges && !isLive && totalLength != nil } }
    /// Retries made so far.
    public var retryCount: Int { condition.withLock { retries } }

    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(MediaError) -> Int {
        condition.lock()
        defer { condition.unlock() }
        readerPosition = offset
        if isLive { cache.discard(before: offset - configuration.liveWindowBytes) }
        while true {
            if cancelled { throw MediaError(.cancelled, input: url, reason: "cancelled") }
            let count = cache.copy(from: offset, into: buffer)
            if count > 0 { return count }
            if let end = totalLength ?? endOfBody, offset >= end { return 0 }
            if let failure { throw failure }
            let transferWillBringIt = transfer.map { $0.task != nil && $0.position <= offset && offset - $0.position <= configuration.seekThresholdBytes } ?? false
            if !transferWillBringIt {
                if offset > 0 && (!acceptsRanges || isLive) {
                    throw MediaError(.unsupported, input: url, reason: "cannot seek: the server does not accept range requests")
                }
                startTransfer(at: offset)
            }
            condition.wait()
        }
    }

    public func bufferingState(from offset: Int64) -> ByteBufferingState {
        condition.withLock {
            let end = cache.contiguousEnd(from: offset)
            let complete = (totalLength ?? endOfBody).map { end >= $0 } ?? false
            return ByteBufferingState(bytesAhead: end - offset, isComplete: complete,
                                      arrivalBytesPerSecond: arrivalRate(now: clock.now()), loadedRanges: cache.ranges)
        }
    }

    public func cancel() {
        condition.withLock {
            cancelled = true
            transfer?.task?.cancel()
            transfer = nil
            condition.broadcast()
        }
    }

    // MARK: Transfers (called with `condition` locked)

    private func startTransfer(at offset: Int64) {
        transfer?.task?.cancel()
        generation += 1
        arrivals.removeAll()
        let id = generation
        transfer = Transfer(generation: id, position: offset, startTime: clock.now(), task: nil)
        transfer!.task = Task(executorPreference: executor) { [self] in await run(generation: id, from: offset) }
    }

    /// Bytes per second over the last two seconds of this transfer (less just after it started).
    private func arrivalRate(now: Int64) -> Double? {
        guard let transfer else { return nil }
        let window: Int64 = 2_000_000_000
        let span = min(window, now - transfer.startTime)
        // A rate over less than a few packets' time would be noise.
        guard span >= 25_000_000 else { return nil }
        let bytes = arrivals.reduce(0) { $0 + ($1.time >= now - span ? $1.bytes : 0) }
        return Double(bytes) * 1e9 / Double(span)
    }

    // MARK: The download task

    private struct TransferFailure: Error {
        var reason: String
        var retryable: Bool
    }

    private func run(generation id: Int, from start: Int64) async {
        var position = start
        var attempt = 0
        while !Task.isCancelled {
            do {
                try await transferOnce(generation: id, position: &position, attempt: &attempt)
                return
            } catch let failed as TransferFailure {
                guard failed.retryable, attempt < configuration.retryDelays.count else {
                    let tries = attempt > 0 ? " (after \(attempt) retr\(attempt == 1 ? "y" : "ies"))" : ""
                    finish(generation: id, failure: MediaError(failed.reason.hasPrefix("HTTP 404") ? .notFound : .network, input: url, reason: failed.reason + tries))
                    return
                }
                let delay = configuration.retryDelays[attempt]
                attempt += 1
                condition.withLock { retries += 1 }
                onEvent?(.retrying(attempt: attempt, delay: delay, reason: failed.reason))
                do { try await executor.sleep(for: delay) } catch { return }
            } catch {
                if Task.isCancelled { return }
                finish(generation: id, failure: MediaError(.network, input: url, reason: Self.describe(error)))
                return
            }
        }
    }

    private func transferOnce(generation id: Int, position: inout Int64, attempt: inout Int) async throws {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "User-Agent", value: "Tutti/0.1")
        if position > 0 { request.headers.add(name: "Range", value: "bytes=\(position)-") }
        if configuration.requestsICYMetadata { request.headers.add(name: "Icy-MetaData", value: "1") }
        let response: HTTPClientResponse
        do {
            response = try await configuration.urlPolicy.execute(request, client: client,
                                                                 timeout: .nanoseconds(Int64(configuration.responseTimeout.components.seconds) * 1_000_000_000))
        } catch let refusal as URLPolicy.Refusal {
            throw TransferFailure(reason: refusal.reason, retryable: false)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw TransferFailure(reason: Self.describe(error), retryable: true)
        }
        let status = response.status.code
        guard status == 200 || status == 206 else {
            let reason = "HTTP \(status) \(response.status.reasonPhrase)"
            throw TransferFailure(reason: reason, retryable: status >= 500 || status == 408 || status == 429)
        }
        // A server that ignores the range answers 200 with the whole body: skip to `position`.
        var skip = status == 200 ? position : 0
        let contentLength = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
        let rangeTotal = response.headers.first(name: "Content-Range").flatMap(Self.total(fromContentRange:))
        let metaInterval = response.headers.first(name: "icy-metaint").flatMap { Int($0) }
        var icy = metaInterval.flatMap { $0 > 0 ? ICYMetadataFilter(interval: $0) : nil }
        let expectedEnd: Int64? = status == 206 ? rangeTotal : (icy == nil ? contentLength : nil)
        condition.withLock {
            guard transfer?.generation == id else { return }
            // Ranges are assumed to work until a server answers one with the whole body.
            if status == 200 && position > 0 { acceptsRanges = false }
            if let expectedEnd { totalLength = expectedEnd }
            isLive = icy != nil || expectedEnd == nil
            headReceived = true
            condition.broadcast()
        }
        var audio: [UInt8] = []
        do {
            for try await chunk in response.body {
                if Task.isCancelled { throw CancellationError() }
                var bytes = chunk
                if skip > 0 {
                    let dropped = min(Int64(bytes.readableBytes), skip)
                    bytes.moveReaderIndex(forwardBy: Int(dropped))
                    skip -= dropped
                    if bytes.readableBytes == 0 { continue }
                }
                var titles: [String] = []
                audio.removeAll(keepingCapacity: true)
                bytes.withUnsafeReadableBytes { raw in
                    if icy != nil { titles = icy!.feed(raw, audio: &audio) } else { audio.append(contentsOf: raw) }
                }
                for title in titles { onEvent?(.title(title)) }
                let stored = audio.count
                let current = position
                let stillCurrent = condition.withLock { () -> Bool in
                    guard transfer?.generation == id else { return false }
                    audio.withUnsafeBytes { cache.store($0, at: current) }
                    transfer?.position = current + Int64(stored)
                    arrivals.append((clock.now(), stored))
                    if arrivals.count > 4096 { arrivals.removeFirst(2048) }
                    if isLive { cache.discard(before: readerPosition - configuration.liveWindowBytes) }
                    condition.broadcast()
                    return true
                }
                guard stillCurrent else { throw CancellationError() }
                position += Int64(stored)
                attempt = 0  // bytes flow again: the next failure starts a fresh backoff
            }
        } catch let error as CancellationError {
            throw error
        } catch {
            if Task.isCancelled { throw CancellationError() }
            // The transfer broke off mid-body: resume from here with a range request.
            throw TransferFailure(reason: Self.describe(error), retryable: true)
        }
        if let expectedEnd, position < expectedEnd {
            throw TransferFailure(reason: "connection closed after \(position) of \(expectedEnd) bytes", retryable: true)
        }
        condition.withLock {
            guard transfer?.generation == id else { return }
            if totalLength == nil { endOfBody = position }
            transfer?.task = nil
            condition.broadcast()
        }
    }

    private func finish(generation id: Int, failure error: MediaError) {
        condition.withLock {
            guard transfer?.generation == id else { return }
            failure = error
            condition.broadcast()
        }
    }

    /// "bytes 100-199/1234" → 1234.
    static func total(fromContentRange value: String) -> Int64? {
        guard let slash = value.lastIndex(of: "/") else { return nil }
        return Int64(value[value.index(after: slash)...])
    }

    static func describe(_ error: any Error) -> String {
        if let client = error as? HTTPClientError {
            switch client {
            case .connectTimeout: return "connection timed out"
            case .readTimeout: return "no data for too long (read timeout)"
            case .deadlineExceeded: return "no response in time"
            case .remoteConnectionClosed: return "connection closed by the server"
            default: return "\(client)"
            }
        }
        if let io = error as? IOError { return io.description }
        let text = String(describing: error)
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        return text
    }
}

/// The HTTP client configuration media sources want: short connect and idle-read timeouts (a
/// stalled server is retried rather than waited on forever), redirects left to the sources (each
/// target is checked by their `URLPolicy` before it is fetched), no content decoding. The process makes one (`make()`), hands it to its `HTTPInputOpener`, and shuts it
/// down when done.
public enum MediaHTTPClient {
    public static func make() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(15))
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }
}
