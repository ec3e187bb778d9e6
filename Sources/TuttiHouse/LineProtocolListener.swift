import NIOCore
import NIOPosix
import Synchronization
import TuttiProtocol

/// The listening side of a line-protocol front end (MPD, Snapcast's control API): binds, frames
/// lines (`LineFrameDecoder`), runs each connection as a task of its own, and holds the number
/// of connections to a cap. One connection over the cap is sent `refusal` (in its protocol's
/// own convention) and closed, with one line in the house's log; the others are not touched.
///
/// Thread-safety: `start` and `stop` from any thread, once each.
public final class LineProtocolListener: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// A line longer than this closes its connection.
        public var maximumLineBytes: Int
        /// Connections served at once (`tutti server --max-connections`).
        public var maximumConnections = 100
        public init(host: String, port: Int, maximumLineBytes: Int) {
            self.host = host
            self.port = port
            self.maximumLineBytes = maximumLineBytes
        }
    }

    /// What the log calls the clients ("MPD clients").
    public let name: String
    public let configuration: Configuration
    private let log: @Sendable (String) -> Void
    private let refusal: @Sendable (String) -> ByteBuffer
    private let serve: @Sendable (NIOAsyncChannel<ByteBuffer, ByteBuffer>) async -> Void
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let listener = Mutex<(any Channel)?>(nil)
    private let state = Mutex(State())

    private struct State {
        var accepting: Task<Void, Never>?
        var sessions: [Int: Task<Void, Never>] = [:]
        var nextID = 0
        var stopped = false
    }

    /// - Parameters:
    ///   - refusal: the message a connection over the cap is sent, given the reason.
    ///   - serve: runs one connection to its end.
    public init(name: String, configuration: Configuration, log: @escaping @Sendable (String) -> Void,
                refusal: @escaping @Sendable (String) -> ByteBuffer, serve: @escaping @Sendable (NIOAsyncChannel<ByteBuffer, ByteBuffer>) async -> Void) {
        self.name = name
        self.configuration = configuration
        self.log = log
        self.refusal = refusal
        self.serve = serve
    }

    /// Connections being served now.
    public var connectionCount: Int { state.withLock { $0.sessions.count } }

    /// Binds and serves; returns the port it listens on.
    public func start() async throws -> Int {
        let maximumLine = configuration.maximumLineBytes
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: configuration.host, port: configuration.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLine)))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        listener.withLock { $0 = server.channel }
        let accepting = Task<Void, Never> {
            do {
                try await server.executeThenClose { connections in
                    for try await connection in connections { self.admit(connection) }
                }
            } catch {
                // The listener closed (`stop`).
            }
        }
        state.withLock { $0.accepting = accepting }
        return server.channel.localAddress?.port ?? configuration.port
    }

    private func admit(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) {
        let limit = configuration.maximumConnections
        let serve = self.serve
        // Counted and started under the lock: a session that ends at once removes itself only
        // after it is recorded.
        let admitted = state.withLock { state -> Bool in
            guard !state.stopped, state.sessions.count < limit else { return false }
            let id = state.nextID
            state.nextID += 1
            state.sessions[id] = Task {
                await serve(connection)
                _ = self.state.withLock { $0.sessions.removeValue(forKey: id) }
            }
            return true
        }
        guard !admitted else { return }
        let reason = "too many connections (\(limit), the --max-connections limit); try again later"
        log("\(name): a connection from \(connection.channel.remoteAddress.map { "\($0)" } ?? "an unknown address") refused: \(reason)")
        let message = refusal(reason)
        Task {
            do {
                try await connection.executeThenClose { _, outbound in try await outbound.write(message) }
            } catch {
                // It left first.
            }
        }
    }

    public func stop() async {
        let channel = listener.withLock { $0 }
        try? await channel?.close()
        let tasks = state.withLock { state -> [Task<Void, Never>] in
            state.stopped = true
            return Array(state.sessions.values) + (state.accepting.map { [$0] } ?? [])
        }
        for task in tasks { task.cancel() }
        try? await group.shutdownGracefully()
    }
}
