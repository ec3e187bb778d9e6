import AsyncHTTPClient
import NIOCore
import TuttiCore

/// Fetches whole HLS resources (playlists, init sections, segments) over AsyncHTTPClient with
/// `HTTPByteSource`'s retry policy: a refused connection, a 5xx/408/429 answer or a transfer
/// that breaks off is retried after each of `retryDelays` in turn; any other 4xx is final.
/// A broken transfer is fetched again whole: segments are small, so resuming would save little.
///
/// Thread-safety: a value type; `fetch` may run concurrently from any task.
struct HLSFetcher: Sendable {
    var client: HTTPClient
    var retryDelays: [Duration]
    var responseTimeout: Duration
    /// The executor the fetching task runs on; its retry waits are timed there too.
    var executor: NetworkTaskExecutor
    /// Times each request, for the throughput.
    var clock: any HostClock
    /// Which URLs are fetched (a playlist's entries may point anywhere).
    var urlPolicy: URLPolicy
    /// A resource larger than this is refused rather than held in memory.
    var maximumBytes = 64 << 20

    struct Fetched {
        var bytes: [UInt8]
        /// Wall time from sending the request to the last byte of the successful attempt.
        var nanoseconds: Int64
    }

    /// A fetch that failed for good: the reason in words (with the retries made), and whether
    /// the server said the resource does not exist.
    struct Failure: Error {
        var reason: String
        var isNotFound: Bool
    }

    private struct AttemptFailure: Error {
        var reason: String
        var retryable: Bool
    }

    /// Throws `Failure`, or `CancellationError` when the task is cancelled.
    /// - Parameter onRetry: called before each wait with the attempt number (from 1), the delay and the reason.
    func fetch(_ resource: HLSResource, onRetry: (Int, Duration, String) -> Void) async throws -> Fetched {
        var attempt = 0
        while true {
            try Task.checkCancellation()
            do {
                return try await fetchOnce(resource)
            } catch let failed as AttemptFailure {
                if Task.isCancelled { throw CancellationError() }
                guard failed.retryable, attempt < retryDelays.count else {
                    let tries = attempt > 0 ? " (after \(attempt) retr\(attempt == 1 ? "y" : "ies"))" : ""
                    throw Failure(reason: failed.reason + tries, isNotFound: failed.reason.hasPrefix("HTTP 404"))
                }
                let delay = retryDelays[attempt]
                attempt += 1
                onRetry(attempt, delay, failed.reason)
                try await executor.sleep(for: delay)
            }
        }
    }

    private func fetchOnce(_ resource: HLSResource) async throws -> Fetched {
        var request = HTTPClientRequest(url: resource.url)
        request.headers.add(name: "User-Agent", value: "Tutti/0.1")
        if let range = resource.byteRange {
            request.headers.add(name: "Range", value: "bytes=\(range.lowerBound)-\(range.upperBound - 1)")
        }
        let start = clock.now()
        let response: HTTPClientResponse
        do {
            response = try await urlPolicy.execute(request, client: client, timeout: .nanoseconds(Int64(responseTimeout.components.seconds) * 1_000_000_000))
        } catch let refusal as URLPolicy.Refusal {
            throw AttemptFailure(reason: refusal.reason, retryable: false)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw AttemptFailure(reason: HTTPByteSource.describe(error), retryable: true)
        }
        let status = response.status.code
        guard status == 200 || status == 206 else {
            throw AttemptFailure(reason: "HTTP \(status) \(response.status.reasonPhrase)", retryable: status >= 500 || status == 408 || status == 429)
        }
        var body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: maximumBytes)
        } catch is NIOTooManyBytesError {
            throw AttemptFailure(reason: "larger than \(maximumBytes >> 20) MB", retryable: false)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw AttemptFailure(reason: HTTPByteSource.describe(error), retryable: true)
        }
        let elapsed = clock.now() - start
        var bytes = body.readBytes(length: body.readableBytes) ?? []
        if let range = resource.byteRange, status == 200 {
            // The server ignored the range and sent the whole resource.
            guard Int64(bytes.count) >= range.upperBound else {
                throw AttemptFailure(reason: "has \(bytes.count) bytes, fewer than the range \(range) needs", retryable: false)
            }
            bytes = Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
        } else if let range = resource.byteRange, Int64(bytes.count) != Int64(range.count) {
            throw AttemptFailure(reason: "range \(range) answered with \(bytes.count) bytes", retryable: true)
        }
        return Fetched(bytes: bytes, nanoseconds: max(elapsed, 1))
    }
}
