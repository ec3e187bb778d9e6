import NIOCore
import Synchronization

/// What a front end's connection (an MPD client, a Snapcast controller) reacts to.
public enum FrontEndEvent: Sendable {
    /// A line its client sent (without the newline).
    case line(ByteBuffer)
    /// The house may have changed (`observeChanges`), or it is time to look again.
    case changed
    /// Its client went away, or was sent away (`FrontEndLimits`).
    case closed
}

/// What one line-protocol connection may hold of the house's memory.
public struct FrontEndLimits: Sendable {
    /// Bytes of lines the client has sent that its session has not taken yet: a client that
    /// sends without reading the replies stalls its session on a full socket, and its lines
    /// pile up. Past this its connection is closed, with one line in the house's log.
    public var maximumPendingInputBytes = 4 << 20
    public init() {}
}

/// The events of one connection (`House.serveLines`), in order. Taking a line releases its
/// bytes from the connection's pending input.
public struct FrontEndEvents: AsyncSequence, Sendable {
    public typealias Element = FrontEndEvent
    let stream: AsyncStream<FrontEndEvent>
    let pending: PendingInput

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<FrontEndEvent>.Iterator
        let pending: PendingInput
        public mutating func next() async -> FrontEndEvent? {
            let event = await base.next()
            if case .line(let line) = event { pending.bytes.subtract(line.readableBytes + 1, ordering: .relaxed) }
            return event
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), pending: pending) }
}

/// Bytes read from a client and not yet taken by its session.
final class PendingInput: Sendable {
    let bytes = Atomic<Int>(0)
}

extension House {
    /// Serves one line-protocol connection: `body` gets, in one stream and in order, each line
    /// the client sends, each change of the house (plus one every `lookAgain`, for what only
    /// time changes), and the client's leaving; and the writer for its replies. The connection
    /// is closed when `body` returns or throws (the client gone, or a line it could not go on
    /// from), or when the client's unread lines pass `limits` (`who` names it in the log).
    /// Thread-safety: any thread; `body` runs on the calling task.
    public func serveLines(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, who: String = "a client", limits: FrontEndLimits = FrontEndLimits(),
                           lookAgain: Duration? = nil,
                           _ body: (FrontEndEvents, NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws -> Void) async {
        let (stream, continuation) = AsyncStream<FrontEndEvent>.makeStream()
        let pending = PendingInput()
        let token = await observeChanges { continuation.yield(.changed) }
        defer { stopObservingChanges(token) }
        let log = self.log
        do {
            try await connection.executeThenClose { inbound, outbound in
                let reader = Task {
                    do {
                        for try await line in inbound {
                            // The newline counts: a flood of empty lines is not free either.
                            let held = pending.bytes.add(line.readableBytes + 1, ordering: .relaxed).newValue
                            guard held <= limits.maximumPendingInputBytes else {
                                log("\(who) closed: it sent over \(limits.maximumPendingInputBytes >> 20) MB of commands without reading the replies")
                                // Its session is stuck writing to it: closing fails that write.
                                connection.channel.close(promise: nil)
                                break
                            }
                            continuation.yield(.line(line))
                        }
                    } catch {}
                    continuation.yield(.closed)
                }
                let ticker = lookAgain.map { interval in
                    Task {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: interval)
                            continuation.yield(.changed)
                        }
                    }
                }
                defer {
                    reader.cancel()
                    ticker?.cancel()
                    continuation.finish()
                }
                try await body(FrontEndEvents(stream: stream, pending: pending), outbound)
            }
        } catch {
            // The client went away, or sent what its connection cannot go on from.
        }
    }

    /// Writes `line` to the house's log (a front end's note: a client sent away, and why).
    public func note(_ line: String) { log(line) }
}
