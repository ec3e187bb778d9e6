import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TuttiCore

/// A user-space network impairment proxy for tests and benchmarks (the kernel here has no
/// netem). Tutti's server listens on TCP (audio, control) and UDP (clock sync) on one port
/// number, so the proxy does the same: it listens on one port for both and forwards TCP to TCP
/// and UDP to UDP at `upstreamHost:upstreamPort`, in both directions, with:
///
/// - one-way `delay` plus uniform `jitter` in ±jitter (never below zero) per UDP datagram and
///   per TCP read chunk. TCP stays in order: a chunk leaves at max(the previous chunk's time,
///   arrival + delay + jitter sample). UDP datagrams are delayed independently and may reorder.
/// - UDP loss: each datagram, each way, is dropped with `udpLossProbability`.
/// - outages (`startOutage`, `scheduleOutage`): nothing is delivered. UDP datagrams are dropped;
///   TCP bytes are held and delivered in order when the outage ends, as a stalled link would with
///   TCP retransmitting. Connections stay open.
///
/// Jitter and loss come from SplitMix64 generators derived from `seed` and each flow's number
/// (TCP connections and UDP sessions counted separately, in order of arrival), so a flow's draws
/// are reproducible. Deliveries are scheduled on the channels' event loops; nothing sleeps.
public final class ImpairmentProxy: Sendable {
    public struct Impairment: Sendable, Equatable {
        /// One-way delay, each direction.
        public var delayNanoseconds: Int64
        /// Each delay is `delay` plus a uniform sample in ±`jitter`, never below zero.
        public var jitterNanoseconds: Int64
        /// Probability that a UDP datagram is dropped, each direction, 0…1.
        public var udpLossProbability: Double
        /// Seeds jitter and loss. A change applies to connections and sessions opened afterwards.
        public var seed: UInt64
        /// A named model of a home network (`NetworkModel`); when set, delays come from it, on a
        /// floor of `delayNanoseconds` if that is set (`jitterNanoseconds` is then unused). With
        /// a shared queue (`NetworkModel.sharedQueueBytes`), the proxy's TCP bytes drain through
        /// it at the model's rate and datagrams wait behind them: a relay whose one queue
        /// carries the stream and the clock exchanges alike.
        public var network: NetworkModel?

        public init(delayNanoseconds: Int64 = 0, jitterNanoseconds: Int64 = 0, udpLossProbability: Double = 0, seed: UInt64 = 1) {
            self.delayNanoseconds = delayNanoseconds
            self.jitterNanoseconds = jitterNanoseconds
            self.udpLossProbability = udpLossProbability
            self.seed = seed
        }

        /// A transparent proxy.
        public static let none = Impairment()

        /// Why these values cannot be used, or nil.
        public var problem: String? {
            let hour: Int64 = 3_600_000_000_000
            if !(0...hour).contains(delayNanoseconds) { return "delay must be between 0 and 1 hour" }
            if !(0...hour).contains(jitterNanoseconds) { return "jitter must be between 0 and 1 hour" }
            if !(udpLossProbability >= 0 && udpLossProbability <= 1) { return "UDP loss probability must be between 0 and 1" }
            if let network, network.sharedQueueBytes > 0, !(network.queueBytesPerSecond > 0 && network.queueBytesPerSecond.isFinite) {
                return "the network model's shared queue must drain at a positive rate"
            }
            return nil
        }
    }

    public struct Statistics: Sendable, Equatable, CustomStringConvertible {
        public struct Direction: Sendable, Equatable {
            public var udpDatagramsForwarded = 0
            /// Dropped by the loss probability.
            public var udpDatagramsLost = 0
            /// Dropped because the link was down (arriving or due during an outage).
            public var udpDatagramsDroppedByOutage = 0
            public var tcpBytesForwarded = 0

            public var udpDatagramsDropped: Int { udpDatagramsLost + udpDatagramsDroppedByOutage }
            /// Datagrams the proxy received in this direction and has decided on so far
            /// (forwarded or dropped; those still delayed are not counted).
            public var udpDatagramsHandled: Int { udpDatagramsForwarded + udpDatagramsDropped }

            public init(udpDatagramsForwarded: Int = 0, udpDatagramsLost: Int = 0, udpDatagramsDroppedByOutage: Int = 0, tcpBytesForwarded: Int = 0) {
                self.udpDatagramsForwarded = udpDatagramsForwarded
                self.udpDatagramsLost = udpDatagramsLost
                self.udpDatagramsDroppedByOutage = udpDatagramsDroppedByOutage
                self.tcpBytesForwarded = tcpBytesForwarded
            }
        }

        /// Client → upstream.
        public var toUpstream = Direction()
        /// Upstream → clients.
        public var toClients = Direction()
        /// TCP connections accepted.
        public var tcpConnections = 0
        /// Accepted connections closed because the upstream could not be reached.
        public var tcpUpstreamFailures = 0
        /// UDP client addresses seen (each gets its own upstream socket).
        public var udpSessions = 0

        public init(toUpstream: Direction = Direction(), toClients: Direction = Direction(), tcpConnections: Int = 0,
                    tcpUpstreamFailures: Int = 0, udpSessions: Int = 0) {
            self.toUpstream = toUpstream
            self.toClients = toClients
            self.tcpConnections = tcpConnections
            self.tcpUpstreamFailures = tcpUpstreamFailures
            self.udpSessions = udpSessions
        }

        public var description: String {
            func udp(_ d: Direction) -> String {
                "\(d.udpDatagramsForwarded) forwarded, \(d.udpDatagramsLost) lost, \(d.udpDatagramsDroppedByOutage) dropped in outages"
            }
            return "tcp: \(tcpConnections) connections (\(tcpUpstreamFailures) upstream failures), "
                + "\(toUpstream.tcpBytesForwarded) bytes up, \(toClients.tcpBytesForwarded) bytes down; "
                + "udp: \(udpSessions) sessions, up \(udp(toUpstream)); down \(udp(toClients))"
        }
    }

    public let listenHost: String
    public let listenPort: Int
    public let upstreamHost: String
    public let upstreamPort: Int
    private let group: any EventLoopGroup
    let link: ImpairmentLink
    private let state = Mutex(Lifecycle())

    private struct Lifecycle {
        enum Phase { case idle, starting, running, stopped }
        var phase = Phase.idle
        var tcpServer: (any Channel)?
        var udp: (any Channel)?
        var port: Int?
        /// Open TCP channels (both sides), closed by `stop()`.
        var connections: [ObjectIdentifier: any Channel] = [:]
    }

    /// Binding with port 0 tries this many ephemeral TCP ports before giving up on finding one
    /// whose UDP twin is free.
    static let bindAttempts = 16

    /// - Parameters:
    ///   - listenPort: 0 picks an ephemeral port (the same number for TCP and UDP).
    ///   - group: runs the proxy's channels; the TCP halves of a connection share a loop.
    public init(listenHost: String = "127.0.0.1", listenPort: Int = 0, upstreamHost: String, upstreamPort: Int,
                impairment: Impairment = .none, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        if let problem = impairment.problem { preconditionFailure("ImpairmentProxy: \(problem)") }
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.group = group
        self.link = ImpairmentLink(impairment: impairment)
    }

    // MARK: Lifecycle

    /// Binds TCP and UDP on one port and starts forwarding. Returns the port.
    public func start() async throws -> Int {
        try state.withLock { s in
            guard s.phase == .idle else { throw ImpairmentProxyError(s.phase == .stopped ? "proxy was stopped" : "proxy already started") }
            s.phase = .starting
        }
        do {
            let upstream: SocketAddress
            do {
                upstream = try SocketAddress.makeAddressResolvingHost(upstreamHost, port: upstreamPort)
            } catch {
                throw ImpairmentProxyError("cannot resolve upstream \(upstreamHost):\(upstreamPort): \(error)")
            }
            let (tcp, udp, port) = try await bind(upstream: upstream)
            let stoppedMeanwhile = state.withLock { s in
                guard s.phase == .starting else { return true }
                s.phase = .running
                s.tcpServer = tcp
                s.udp = udp
                s.port = port
                return false
            }
            if stoppedMeanwhile {
                tcp.close(promise: nil)
                udp.close(promise: nil)
                throw ImpairmentProxyError("proxy stopped while starting")
            }
            return port
        } catch {
            state.withLock { s in if s.phase == .starting { s.phase = .idle } }
            throw error
        }
    }

    /// Stops listening and closes every connection and UDP session. Counters stay readable.
    public func stop() async throws {
        let (channels, connections) = state.withLock { s in
            s.phase = .stopped
            let channels = [s.tcpServer, s.udp].compactMap { $0 }
            let connections = Array(s.connections.values)
            s.tcpServer = nil
            s.udp = nil
            s.connections = [:]
            return (channels, connections)
        }
        for channel in channels {
            try? await channel.close()
        }
        for channel in connections {
            try? await channel.close()
        }
    }

    /// Resets every open TCP connection through the proxy, both halves (an RST, as from a router
    /// that restarts or a NAT that forgets); the listener stays, so clients can reconnect.
    /// Returns how many channels were reset.
    @discardableResult
    public func resetConnections() async -> Int {
        let connections = state.withLock { Array($0.connections.values) }
        for channel in connections {
            // Linger 0: close sends RST instead of FIN.
            if let socket = channel as? any SocketOptionProvider {
                try? await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            }
            try? await channel.close()
        }
        return connections.count
    }

    /// The port bound by `start()` (TCP and UDP), nil before.
    public var boundPort: Int? { state.withLock { $0.port } }

    // MARK: Impairment

    public var impairment: Impairment { link.impairment }

    /// Applies to what arrives from now on; already scheduled deliveries keep their times.
    public func setImpairment(_ impairment: Impairment) {
        if let problem = impairment.problem { preconditionFailure("ImpairmentProxy: \(problem)") }
        link.impairment = impairment
    }

    /// An outage from `after` from now, lasting `duration`. Outages may overlap.
    public func scheduleOutage(after: Duration, duration: Duration) {
        let start = NIODeadline.now() + TimeAmount(after)
        link.addOutage(start: start, end: start + TimeAmount(duration))
    }

    /// An outage from now, lasting `durationNanoseconds`.
    public func startOutage(durationNanoseconds: Int64) {
        let now = NIODeadline.now()
        link.addOutage(start: now, end: now + .nanoseconds(durationNanoseconds))
    }

    /// Whether the link is down right now.
    public var isInOutage: Bool { link.outageEnd(at: .now()) != nil }

    public var statistics: Statistics { link.statistics() }

    /// Flips one bit of the byte at `flipAt` of what the upstream sends toward the clients (all
    /// connections' bytes counted in order), as a forged or corrupted segment would, and keeps
    /// the first `captureLimit` bytes of it, as an eavesdropper on the path would.
    public func tapToClients(flipAt: Int? = nil, captureLimit: Int = 0) {
        link.setTap(flipAt: flipAt, captureLimit: captureLimit)
    }

    /// The bytes kept by `tapToClients(captureLimit:)`.
    public var capturedToClients: [UInt8] { link.capturedToClient }

    /// Whether the byte `tapToClients(flipAt:)` asked for has been flipped.
    public var hasFlipped: Bool { link.flipped }

    // MARK: Binding

    private func bind(upstream: SocketAddress) async throws -> (tcp: any Channel, udp: any Channel, port: Int) {
        if listenPort != 0 {
            let tcp = try await tcpBootstrap(upstream: upstream).bind(host: listenHost, port: listenPort).get()
            do {
                let udp = try await udpBootstrap(upstream: upstream).bind(host: listenHost, port: listenPort).get()
                return (tcp, udp, listenPort)
            } catch {
                try? await tcp.close()
                throw error
            }
        }
        var lastError: (any Error)?
        for _ in 0..<Self.bindAttempts {
            let tcp = try await tcpBootstrap(upstream: upstream).bind(host: listenHost, port: 0).get()
            guard let port = tcp.localAddress?.port else {
                try? await tcp.close()
                throw ImpairmentProxyError("bound TCP socket has no port")
            }
            do {
                let udp = try await udpBootstrap(upstream: upstream).bind(host: listenHost, port: port).get()
                return (tcp, udp, port)
            } catch {
                // The UDP twin of this ephemeral port is taken: try another.
                lastError = error
                try? await tcp.close()
            }
        }
        throw ImpairmentProxyError("no port free for both TCP and UDP on \(listenHost) after \(Self.bindAttempts) tries: \(lastError.map { "\($0)" } ?? "")")
    }

    private func tcpBootstrap(upstream: SocketAddress) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { try accept(channel, upstream: upstream) }
            }
    }

    private func udpBootstrap(upstream: SocketAddress) -> DatagramBootstrap {
        let link = link
        return DatagramBootstrap(group: group)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: UDPRelayHandler.maximumDatagramSize))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UDPRelayHandler(link: link, upstreamAddress: upstream))
                }
            }
    }

    /// Runs on the accepted channel's loop. The channel's reads are held by its relay handler
    /// until the upstream connection is up; if that fails, the client's connection is closed.
    private func accept(_ channel: any Channel, upstream: SocketAddress) throws {
        link.tcpConnections.add(1, ordering: .relaxed)
        let random = link.makeFlowRandom(udp: false)
        let link = link
        let client = TCPRelayHandler(direction: .toUpstream, link: link, random: random.toUpstream)
        try channel.pipeline.syncOperations.addHandler(client)
        guard track(channel) else {
            channel.close(promise: nil)
            return
        }
        ClientBootstrap(group: channel.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connectTimeout(.seconds(10))
            .channelInitializer { upstreamChannel in
                upstreamChannel.eventLoop.makeCompletedFuture {
                    try upstreamChannel.pipeline.syncOperations.addHandler(
                        TCPRelayHandler(direction: .toClient, link: link, random: random.toClient))
                }
            }
            .connect(to: upstream)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let upstreamChannel):
                    guard !client.isClosed, track(upstreamChannel),
                          let server = try? upstreamChannel.pipeline.syncOperations.handler(type: TCPRelayHandler.self) else {
                        upstreamChannel.close(promise: nil)
                        channel.close(promise: nil)
                        return
                    }
                    client.link(to: server)
                    server.link(to: client)
                case .failure:
                    link.tcpUpstreamFailures.add(1, ordering: .relaxed)
                    channel.close(promise: nil)
                }
            }
    }

    /// Remembers an open channel for `stop()`. False once stopped.
    private func track(_ channel: any Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        let accepted = state.withLock { s in
            guard s.phase != .stopped else { return false }
            s.connections[id] = channel
            return true
        }
        if accepted {
            channel.closeFuture.whenComplete { [self] _ in _ = state.withLock { $0.connections.removeValue(forKey: id) } }
        }
        return accepted
    }
}

/// Why the proxy could not start, in one line.
public struct ImpairmentProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
