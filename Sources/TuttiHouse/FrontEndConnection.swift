import NIOCore

/// What a front end's connection (an MPD client, a Snapcast controller) reacts to.
public enum FrontEndEvent: Sendable {
    /// A line its client sent (without the newline).
    case line(ByteBuffer)
    /// The house may have changed (`observeChanges`), or it is time to look again.
    case changed
    /// Its client went away.
    case closed
}

extension House {
    /// Serves one line-protocol connection: `body` gets, in one stream and in order, each line
    /// the client sends, each change of the house (plus one every `lookAgain`, for what only
    /// time changes), and the client's leaving; and the writer for its replies. The connection
    /// is closed when `body` returns or throws (the client gone, or a line it could not go on
    /// from).
    /// Thread-safety: any thread; `body` runs on the calling task.
    public func serveLines(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, lookAgain: Duration? = nil,
                           _ body: (AsyncStream<FrontEndEvent>, NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws -> Void) async {
        let (events, continuation) = AsyncStream<FrontEndEvent>.makeStream()
        let token = await observeChanges { continuation.yield(.changed) }
        defer { stopObservingChanges(token) }
        do {
            try await connection.executeThenClose { inbound, outbound in
                let reader = Task {
                    do { for try await line in inbound { continuation.yield(.line(line)) } } catch {}
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
                try await body(events, outbound)
            }
        } catch {
            // The client went away, or sent what its connection cannot go on from.
        }
    }
}
