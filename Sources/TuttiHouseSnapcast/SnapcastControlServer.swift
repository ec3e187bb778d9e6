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
        let hostName = ProcessInfo.processInfo.hostName
        let accepting = Task<Void, Never> {
            try? await server.executeThenClose { connections in
                for try await connection in connections {
                    let session = Task {
                        var connectionState = SnapcastControlConnection(methods: SnapcastControlMethods(house: house, hostName: hostName))
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
/// `Server.OnUpdate` whenever what Server.GetStatus would say has changed.
struct SnapcastControlConnection {
    var methods: SnapcastControlMethods

    mutating func run(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        await methods.house.serveLines(connection) { events, outbound in
            var lastSent = (try? await methods.view())?.steady
            for await event in events {
                switch event {
                case .closed:
                    return
                case .changed:
                    guard let view = try? await methods.view() else { continue }
                    let now = view.steady
                    guard now != lastSent else { continue }
                    lastSent = now
                    let notification: [String: Any] = ["jsonrpc": "2.0", "method": "Server.OnUpdate",
                                                       "params": SnapcastServerStatus.json(view, hostName: methods.hostName)]
                    try await outbound.write(Self.line(notification))
                case .line(let buffer):
                    if let reply = await answer(Data(buffer.readableBytesView)) { try await outbound.write(reply) }
                }
            }
        }
    }

    /// The reply to one line: a request, a notification (no reply) or a batch.
    private mutating func answer(_ data: Data) async -> ByteBuffer? {
        guard let parsed = try? JSONSerialization.jsonObject(with: data) else {
            return Self.line(Self.error(id: NSNull(), code: -32700, message: "Parse error"))
        }
        if let batch = parsed as? [Any] {
            guard !batch.isEmpty else { return Self.line(Self.error(id: NSNull(), code: -32600, message: "Invalid request")) }
            var replies: [Any] = []
            for request in batch { if let reply = await respond(to: request) { replies.append(reply) } }
            return replies.isEmpty ? nil : Self.line(replies)
        }
        return await respond(to: parsed).map { Self.line($0) }
    }

    private mutating func respond(to request: Any) async -> [String: Any]? {
        guard let object = request as? [String: Any], let method = object["method"] as? String else {
            return Self.error(id: (request as? [String: Any])?["id"] ?? NSNull(), code: -32600, message: "Invalid request")
        }
        let id = object["id"]
        let params = object["params"] as? [String: Any] ?? [:]
        do throws(SnapcastControlMethods.Failure) {
            let result = try await methods.call(method, params)
            guard let id else { return nil }
            return ["jsonrpc": "2.0", "id": id, "result": result]
        } catch {
            return Self.error(id: id ?? NSNull(), code: error.code, message: error.message)
        }
    }

    private static func error(id: Any, code: Int, message: String) -> [String: Any] {
        ["jsonrpc": "2.0", "id": id, "error": ["code": code, "message": message]]
    }

    private static func line(_ object: Any) -> ByteBuffer {
        var data = (try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes])) ?? Data("{}".utf8)
        // snapserver ends each message with CRLF, and its clients split on it.
        data.append(contentsOf: [UInt8(ascii: "\r"), UInt8(ascii: "\n")])
        return ByteBuffer(bytes: data)
    }
}
