import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TuttiHouse
import TuttiProtocol

/// The house as an MPD server (`tutti server --mpd HOST:PORT`, 6600 by default), so that the
/// clients people already use (mpc, ncmpcpp, M.A.L.P., Cantata) control it: the queue, the
/// library, the group's volume, and the rooms as MPD's outputs.
///
/// Each connection is an `MPDSession` on a task of its own; the house is reached only through
/// what every front end uses (`House.perform`, `observeChanges`, `artwork(forTrack:)`).
/// Thread-safety: `start` and `stop` from any thread, once each.
public final class MPDServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "0.0.0.0"
        public var port = 6600
        /// A line longer than this closes its connection, as MPD does.
        public var maximumLineBytes = 64 * 1024
        public init() {}
    }

    /// When the first server started (`stats`' uptime).
    static let started = ProcessInfo.processInfo.systemUptime

    private let house: House
    private let configuration: Configuration
    private let group: MultiThreadedEventLoopGroup
    private let listener = Mutex<(any Channel)?>(nil)
    private let sessions = Mutex<[Task<Void, Never>]>([])
    private let playlistVersion = MPDPlaylistVersion()
    private let partitionClients = MPDPartitionClients()
    private let updateJobs = MPDUpdateJobs()

    public init(house: House, configuration: Configuration = Configuration()) {
        self.house = house
        self.configuration = configuration
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        _ = Self.started
    }

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
        let house = self.house, uris = MPDSongURIs(roots: house.configuration.musicDirectories), version = playlistVersion
        let partitionClients = self.partitionClients, updateJobs = self.updateJobs
        let accepting = Task<Void, Never> {
            try? await server.executeThenClose { connections in
                for try await connection in connections {
                    let session = Task {
                        var session = MPDSession(house: house, uris: uris, playlistVersion: version, partitionClients: partitionClients, updateJobs: updateJobs)
                        await session.run(connection)
                    }
                    self.sessions.withLock { $0.append(session) }
                }
            }
        }
        sessions.withLock { $0.append(accepting) }
        return server.channel.localAddress?.port ?? configuration.port
    }

    public func stop() async {
        let channel = listener.withLock { $0 }
        try? await channel?.close()
        for session in sessions.withLock({ $0 }) { session.cancel() }
        try? await group.shutdownGracefully()
    }
}
