import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TuttiHouse
import TuttiProtocol

/// The house as a Snapcast server's control API (`tutti server --snapcast-control HOST:PORT`,
/// 1705 by default): line-delimited JSON-RPC 2.0, so Snapcast's controllers (Snapweb,
/// Snapdroid, Home Assistant's Snapcast integration) see the house's rooms as clients, set their
/// volume, latency and name, group them, and drive playback. Every change is pushed as
/// `Server.OnUpdate` with the whole status, as snapserver does on a change it cannot name.
/// Thread-safety: `start` and `stop` from any thread, once each.
public final class SnapcastControlServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "0.0.0.0"
        public var port = 1705
        public var maximumLineBytes = 1 << 20
        public init() {}
    }

    private let house: House
    private let configuration: Configuration
    private let group: MultiThreadedEventLoopGroup
    private let listener = Mutex<(any Channel)?>(nil)
    private let tasks = Mutex<[Task<Void, Never>]>([])

    public init(house: House, configuration: Configuration = Configuration()) {
        self.house = house
        self.configuration = configuration
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    /// Binds and serves; returns the port it listens on.
    public func start() async throws -> Int {
        let maximumLine = configuration.maximumLineBytes
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: configuration.host, port: configuration.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLine)))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        listener.withLock { $0 = server.channel }
        let house = self.house
        let hostName = ProcessInfo.processInfo.hostName, mutedVolumes = SnapcastMutedVolumes()
        let accepting = Task<Void, Never> {
            try? await server.executeThenClose { connections in
                for try await connection in connections {
                    let session = Task {
                        var connectionState = SnapcastControlConnection(rpc: SnapcastJSONRPC(house: house, hostName: hostName, mutedVolumes: mutedVolumes))
                        await connectionState.run(connection)
                    }
                    self.tasks.withLock { $0.append(session) }
                }
            }
        }
        tasks.withLock { $0.append(accepting) }
        return server.channel.localAddress?.port ?? configuration.port
    }

    public func stop() async {
        try? await listener.withLock({ $0 })?.close()
        for task in tasks.withLock({ $0 }) { task.cancel() }
        try? await group.shutdownGracefully()
    }
}

/// One controller's connection: requests (single or batched) answered in order, and
/// `Server.OnUpdate` whenever what Server.GetStatus would say has changed. Each message is a
/// line ending in CRLF, as snapserver writes them.
struct SnapcastControlConnection {
    var rpc: SnapcastJSONRPC

    mutating func run(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        await rpc.house.serveLines(connection) { events, outbound in
            _ = await rpc.updateNotification()
            for await event in events {
                switch event {
                case .closed:
                    return
                case .changed:
                    if let notification = await rpc.updateNotification() { try await outbound.write(Self.line(notification)) }
                case .line(let buffer):
                    if let reply = await rpc.answer(Data(buffer.readableBytesView)) { try await outbound.write(Self.line(reply)) }
                }
            }
        }
    }

    private static func line(_ message: Data) -> ByteBuffer {
        var buffer = ByteBuffer(bytes: message)
        // snapserver ends each message with CRLF, and its clients split on it.
        buffer.writeString("\r\n")
        return buffer
    }
}
