import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TuttiCore

/// Clients a house must survive while its rooms play: idle connections that never say hello,
/// slow-drip connections that send a byte now and then, a flood of UDP garbage at the clock-sync
/// port, and random bytes to the TCP port (each connection writing until the house closes it,
/// then another). Seeded; for `tutti-bench hostile` and the end-to-end test.
public enum HostileClients {
    public struct Plan: Sendable {
        public var idleConnections = 1000
        public var slowDripConnections = 20
        public var randomTCPBytes: Int64 = 1 << 30
        public var randomUDPBytes: Int64 = 1 << 30
        /// Connections writing random bytes at once.
        public var parallelWriters = 8
        public var seed: UInt64 = 1
        public init() {}
    }

    public struct Outcome: Sendable, CustomStringConvertible {
        public var idleConnectionsOpened = 0
        public var slowDripConnectionsOpened = 0
        public var tcpBytesSent: Int64 = 0
        public var tcpConnectionsMade = 0
        public var udpDatagramsSent = 0
        public var udpBytesSent: Int64 = 0
        public var seconds = 0.0
        public var description: String {
            "\(idleConnectionsOpened) idle and \(slowDripConnectionsOpened) slow-drip connections; \(tcpBytesSent >> 20) MiB of random bytes over \(tcpConnectionsMade) TCP connections; \(udpBytesSent >> 20) MiB in \(udpDatagramsSent) UDP datagrams; \(String(format: "%.1f", seconds)) s"
        }
    }

    /// Runs `plan` against `host:port` and returns once the random bytes are all sent; the idle
    /// and slow-drip connections are closed at the end.
    public static func run(host: String, port: Int, plan: Plan, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> Outcome {
        let started = Date()
        var outcome = Outcome()
        let bootstrap = ClientBootstrap(group: group).channelOption(.socketOption(.so_reuseaddr), value: 1)
        var held: [any Channel] = []
        for _ in 0..<plan.idleConnections {
            guard let channel = try? await bootstrap.connect(host: host, port: port).get() else { continue }
            held.append(channel)
            outcome.idleConnectionsOpened += 1
        }
        var drips: [RepeatedTask] = []
        for index in 0..<plan.slowDripConnections {
            guard let channel = try? await bootstrap.connect(host: host, port: port).get() else { continue }
            held.append(channel)
            outcome.slowDripConnectionsOpened += 1
            // A frame header that promises more than it ever sends, a byte every 100 ms.
            let byte = UInt8(truncatingIfNeeded: index)
            drips.append(channel.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
                channel.writeAndFlush(channel.allocator.buffer(bytes: [byte]), promise: nil)
            })
        }
        async let udp = floodUDP(host: host, port: port, bytes: plan.randomUDPBytes, seed: plan.seed ^ 0x55, group: group)
        let writers = max(1, plan.parallelWriters)
        let share = plan.randomTCPBytes / Int64(writers)
        let results = try await withThrowingTaskGroup(of: (Int64, Int).self) { tasks in
            for writer in 0..<writers {
                tasks.addTask { try await writeRandom(host: host, port: port, bytes: share, seed: plan.seed &+ UInt64(writer), group: group) }
            }
            var all: [(Int64, Int)] = []
            for try await result in tasks { all.append(result) }
            return all
        }
        for (bytes, connections) in results {
            outcome.tcpBytesSent += bytes
            outcome.tcpConnectionsMade += connections
        }
        (outcome.udpDatagramsSent, outcome.udpBytesSent) = try await udp
        for drip in drips { drip.cancel() }
        for channel in held { try? await channel.close() }
        outcome.seconds = Date().timeIntervalSince(started)
        return outcome
    }

    /// Writes `bytes` random bytes, connection after connection (the house closes each soon).
    private static func writeRandom(host: String, port: Int, bytes: Int64, seed: UInt64, group: any EventLoopGroup) async throws -> (Int64, Int) {
        let bootstrap = ClientBootstrap(group: group)
        var random = SplitMix64(seed: seed)
        var sent: Int64 = 0, connections = 0, refused = 0
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while sent < bytes {
            guard let channel = try? await bootstrap.connect(host: host, port: port).get() else {
                refused += 1
                if refused > 100 { throw HostileClientsError("\(host):\(port) refused 100 connections") }
                continue
            }
            connections += 1
            while sent < bytes {
                for index in stride(from: 0, to: chunk.count, by: 8) {
                    withUnsafeBytes(of: random.next()) { chunk.replaceSubrange(index..<index + 8, with: $0) }
                }
                do {
                    try await channel.writeAndFlush(channel.allocator.buffer(bytes: chunk)).get()
                    sent += Int64(chunk.count)
                } catch {
                    break
                }
            }
            try? await channel.close()
        }
        return (sent, connections)
    }

    private static func floodUDP(host: String, port: Int, bytes: Int64, seed: UInt64, group: any EventLoopGroup) async throws -> (Int, Int64) {
        guard bytes > 0 else { return (0, 0) }
        var random = SplitMix64(seed: seed)
        let channel = try await DatagramBootstrap(group: group).bind(host: "0.0.0.0", port: 0).get()
        let target = try SocketAddress.makeAddressResolvingHost(host, port: port)
        var sent: Int64 = 0, datagrams = 0
        while sent < bytes {
            let size = 1 + Int(random.next() % 1400)
            var payload = [UInt8](repeating: 0, count: size)
            for index in payload.indices { payload[index] = UInt8(truncatingIfNeeded: random.next()) }
            // Waiting for each write keeps the flood at what the socket takes.
            try? await channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: channel.allocator.buffer(bytes: payload))).get()
            sent += Int64(size)
            datagrams += 1
        }
        try? await channel.close()
        return (datagrams, sent)
    }
}

public struct HostileClientsError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
