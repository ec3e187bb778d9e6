import Foundation
import NIOCore
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
        public var host = "127.0.0.1"
        public var port = 1705
        public var maximumLineBytes = 1 << 20
        /// Controllers served at once.
        public var maximumConnections = 100
        public var limits = FrontEndLimits()
        public init() {}
    }

    private let listener: LineProtocolListener

    public init(house: House, configuration: Configuration = Configuration()) {
        var listening = LineProtocolListener.Configuration(host: configuration.host, port: configuration.port,
                                                           maximumLineBytes: configuration.maximumLineBytes)
        listening.maximumConnections = configuration.maximumConnections
        let hostName = ProcessInfo.processInfo.hostName, mutedVolumes = SnapcastMutedVolumes(), limits = configuration.limits
        listener = LineProtocolListener(name: "Snapcast controllers", configuration: listening, log: { house.note($0) },
                                        refusal: { SnapcastControlConnection.line(JSONRPC.error(id: .null, code: -32000, message: $0)) }) { connection in
            var connectionState = SnapcastControlConnection(rpc: SnapcastJSONRPC(house: house, hostName: hostName, mutedVolumes: mutedVolumes))
            await connectionState.run(connection, limits: limits)
        }
    }

    /// Binds and serves; returns the port it listens on.
    public func start() async throws -> Int { try await listener.start() }

    public func stop() async { await listener.stop() }
}

/// One controller's connection: requests (single or batched) answered in order, and
/// `Server.OnUpdate` whenever what Server.GetStatus would say has changed. Each message is a
/// line ending in CRLF, as snapserver writes them.
struct SnapcastControlConnection {
    var rpc: SnapcastJSONRPC

    mutating func run(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, limits: FrontEndLimits = FrontEndLimits()) async {
        let who = "a Snapcast controller at \(connection.channel.remoteAddress.map { "\($0)" } ?? "an unknown address")"
        await rpc.house.serveLines(connection, who: who, limits: limits) { events, outbound in
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

    static func line(_ message: Data) -> ByteBuffer {
        var buffer = ByteBuffer(bytes: message)
        // snapserver ends each message with CRLF, and its clients split on it.
        buffer.writeString("\r\n")
        return buffer
    }
}
