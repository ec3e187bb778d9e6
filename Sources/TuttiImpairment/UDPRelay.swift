import NIOCore
import NIOPosix
import TuttiCore

/// The proxy's UDP side. The listening socket receives clients' datagrams; each client address
/// gets its own upstream socket (a session), so the upstream's replies can be told apart and
/// sent back to the right client from the listening socket. Every datagram independently gets
/// a delay (so datagrams may reorder) and may be lost; during an outage datagrams are dropped,
/// both when they arrive and when they would be delivered. All sessions live on the listening
/// channel's event loop.
final class UDPRelayHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    /// Largest datagram relayed whole.
    static let maximumDatagramSize = 65_536
    /// Sessions quiet for this long are closed (their upstream socket released).
    static let sessionIdleTimeout = TimeAmount.seconds(120)

    final class Session {
        let client: SocketAddress
        var upstream: (any Channel)?
        /// Datagrams due before the upstream socket was bound.
        var waiting: [ByteBuffer] = []
        var random: (toUpstream: SplitMix64, toClient: SplitMix64)
        var lastActivity: NIODeadline
        var isClosed = false

        init(client: SocketAddress, random: (toUpstream: SplitMix64, toClient: SplitMix64), now: NIODeadline) {
            self.client = client
            self.random = random
            self.lastActivity = now
        }
    }

    private let link: ImpairmentLink
    private let upstreamAddress: SocketAddress
    private var context: ChannelHandlerContext?
    private var sessions: [SocketAddress: Session] = [:]
    private var sweep: Scheduled<Void>?

    init(link: ImpairmentLink, upstreamAddress: SocketAddress) {
        self.link = link
        self.upstreamAddress = upstreamAddress
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        scheduleSweep(on: context.eventLoop)
    }

    func channelInactive(context: ChannelHandlerContext) {
        sweep?.cancel()
        sweep = nil
        for session in sessions.values { close(session) }
        sessions.removeAll()
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // e.g. ECONNREFUSED reported for an earlier send: UDP goes on.
    }

    // MARK: Client → upstream

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        let now = NIODeadline.now()
        let session = sessions[envelope.remoteAddress] ?? openSession(for: envelope.remoteAddress, context: context, now: now)
        session.lastActivity = now
        guard let delay = link.admitDatagram(.toUpstream, at: now, random: &session.random.toUpstream) else { return }
        let datagram = Self.compact(envelope.data)
        after(delay, from: now, on: context.eventLoop, direction: .toUpstream) { [self] in sendUpstream(datagram, session: session) }
    }

    private func sendUpstream(_ datagram: ByteBuffer, session: Session) {
        guard !session.isClosed else { return }
        guard let upstream = session.upstream else {
            session.waiting.append(datagram)
            return
        }
        link.toUpstream.udpForwarded.add(1, ordering: .relaxed)
        upstream.writeAndFlush(AddressedEnvelope(remoteAddress: upstreamAddress, data: datagram), promise: nil)
    }

    private func openSession(for client: SocketAddress, context: ChannelHandlerContext, now: NIODeadline) -> Session {
        let session = Session(client: client, random: link.makeFlowRandom(udp: true), now: now)
        sessions[client] = session
        link.udpSessions.add(1, ordering: .relaxed)
        let anyAddress = upstreamAddress.protocol == .inet6 ? "::" : "0.0.0.0"
        DatagramBootstrap(group: context.eventLoop)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: Self.maximumDatagramSize))
            .bind(host: anyAddress, port: 0)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    guard !session.isClosed else { return channel.close(promise: nil) }
                    do {
                        try channel.pipeline.syncOperations.addHandler(UpstreamHandler(relay: self, session: session))
                    } catch {
                        channel.close(promise: nil)
                        return close(session)
                    }
                    session.upstream = channel
                    let waiting = session.waiting
                    session.waiting = []
                    for datagram in waiting { sendUpstream(datagram, session: session) }
                case .failure:
                    close(session)
                }
            }
        return session
    }

    // MARK: Upstream → client

    fileprivate func receivedFromUpstream(_ data: ByteBuffer, session: Session) {
        guard let context, !session.isClosed else { return }
        let now = NIODeadline.now()
        session.lastActivity = now
        guard let delay = link.admitDatagram(.toClient, at: now, random: &session.random.toClient) else { return }
        let datagram = Self.compact(data)
        after(delay, from: now, on: context.eventLoop, direction: .toClient) { [self] in
            guard let context = self.context else { return }
            link.toClient.udpForwarded.add(1, ordering: .relaxed)
            context.writeAndFlush(Self.wrapOutboundOut(AddressedEnvelope(remoteAddress: session.client, data: datagram)), promise: nil)
        }
    }

    // MARK: Helpers

    /// Runs `deliver` after `delay` unless the link is down by then (the datagram is then dropped).
    private func after(_ delay: Int64, from now: NIODeadline, on eventLoop: any EventLoop, direction: ImpairmentDirection,
                       _ deliver: @escaping () -> Void) {
        guard delay > 0 else { return deliver() }
        let link = link
        eventLoop.assumeIsolated().scheduleTask(deadline: now + .nanoseconds(delay)) {
            if link.outageEnd(at: .now()) != nil {
                link.counters(direction).udpDroppedByOutage.add(1, ordering: .relaxed)
            } else {
                deliver()
            }
        }
    }

    /// A datagram arrives in a slice of a 64 KiB receive buffer; copy it out so that holding it
    /// for a while does not hold the whole buffer.
    private static func compact(_ data: ByteBuffer) -> ByteBuffer {
        var copy = ByteBufferAllocator().buffer(capacity: data.readableBytes)
        copy.writeImmutableBuffer(data)
        return copy
    }

    private func close(_ session: Session) {
        guard !session.isClosed else { return }
        session.isClosed = true
        session.waiting = []
        session.upstream?.close(promise: nil)
        session.upstream = nil
        if sessions[session.client] === session { sessions[session.client] = nil }
    }

    private func scheduleSweep(on eventLoop: any EventLoop) {
        sweep = eventLoop.assumeIsolated().scheduleTask(in: .seconds(30)) { [self] in
            let horizon = NIODeadline.now() - Self.sessionIdleTimeout
            for session in sessions.values where session.lastActivity < horizon { close(session) }
            scheduleSweep(on: eventLoop)
        }
    }

    /// Receives the upstream's datagrams for one session.
    private final class UpstreamHandler: ChannelInboundHandler {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        private let relay: UDPRelayHandler
        private let session: Session

        init(relay: UDPRelayHandler, session: Session) {
            self.relay = relay
            self.session = session
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            relay.receivedFromUpstream(Self.unwrapInboundIn(data).data, session: session)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {}
    }
}
