import NIOCore
import NIOPosix
import Synchronization
import Testing
import TuttiCore
@testable import TuttiImpairment
import TuttiSimulation

/// The impairment proxy with real sockets on 127.0.0.1: NIO echo servers (TCP and UDP on one
/// port, like Tutti's server) behind it, NIO clients in front. Timing is only ever checked as a
/// lower bound (the proxy may never deliver early) and a loose upper bound; waits poll for a
/// condition with a deadline.
@Suite struct ImpairmentProxyTests {
    static let millisecond: Int64 = 1_000_000

    // MARK: Pure parts

    @Test func splitMixMatchesTheReferenceAndDelaysStayInTheirBounds() {
        var reference = SplitMix64(seed: 0)
        #expect(reference.next() == 0xE220_A839_7B1D_CDAF)
        #expect(reference.next() == 0x6E78_9E6A_A1B9_65F4)

        var random = SplitMix64(seed: 7)
        let ms = Self.millisecond
        let impairment = ImpairmentProxy.Impairment(delayNanoseconds: 3 * ms, jitterNanoseconds: 2 * ms)
        let samples = (0..<20_000).map { _ in impairment.sampleDelay(using: &random) }
        #expect(samples.allSatisfy { (1 * ms...5 * ms).contains($0) })
        #expect(samples.min()! < 1 * ms + ms / 50 && samples.max()! > 5 * ms - ms / 50)
        let mean = Double(samples.reduce(0, +)) / Double(samples.count)
        #expect(abs(mean - 3e6) < 0.05e6)

        // Jitter larger than the delay clips at zero, never below.
        let wide = ImpairmentProxy.Impairment(delayNanoseconds: 1 * ms, jitterNanoseconds: 3 * ms)
        let clipped = (0..<5000).map { _ in wide.sampleDelay(using: &random) }
        #expect(clipped.min() == 0 && clipped.max()! <= 4 * ms)
        #expect(clipped.filter { $0 == 0 }.count > 1000)  // P(sample ≤ −1 ms) = 1/3
    }

    @Test func flowsDrawReproducibleIndependentSequences() {
        let a = ImpairmentLink(impairment: .init(seed: 99)), b = ImpairmentLink(impairment: .init(seed: 99))
        var (aUp, aDown) = a.makeFlowRandom(udp: true)
        var (bUp, bDown) = b.makeFlowRandom(udp: true)
        // Same seed, same flow number: same draws, whatever else happened.
        _ = b.makeFlowRandom(udp: false)
        #expect(aUp.next() == bUp.next() && aDown.next() == bDown.next())
        // Directions, flows and kinds differ from each other.
        var (secondUp, _) = a.makeFlowRandom(udp: true)
        var (tcpUp, _) = a.makeFlowRandom(udp: false)
        var (otherSeed, _) = ImpairmentLink(impairment: .init(seed: 100)).makeFlowRandom(udp: true)
        #expect(Set([aUp.next(), aDown.next(), secondUp.next(), tcpUp.next(), otherSeed.next()]).count == 5)
    }

    @Test func outagesChainAndExpire() {
        let link = ImpairmentLink(impairment: .none)
        let now = NIODeadline.now()
        link.addOutage(start: now + .seconds(10), end: now + .seconds(20))
        link.addOutage(start: now + .seconds(15), end: now + .seconds(30))
        link.addOutage(start: now + .seconds(30), end: now + .seconds(31))
        #expect(link.outageEnd(at: now) == nil)
        #expect(link.outageEnd(at: now + .seconds(12)) == now + .seconds(31))
        #expect(link.outageEnd(at: now + .seconds(31)) == nil)
    }

    /// The window lands where it was scheduled, measured against the clock rather than by
    /// watching it pass (which a busy machine can sleep through).
    @Test func scheduledOutageComesAndGoes() {
        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: 9, group: Self.group)
        let before = NIODeadline.now()
        proxy.scheduleOutage(after: .milliseconds(200), duration: .milliseconds(300))
        let after = NIODeadline.now()
        #expect(proxy.link.outageEnd(at: before + .milliseconds(150)) == nil)
        #expect(proxy.link.outageEnd(at: after + .milliseconds(201)) != nil)
        #expect(proxy.link.outageEnd(at: after + .milliseconds(499)) != nil)
        #expect(proxy.link.outageEnd(at: before + .milliseconds(501)) == nil)
        #expect(!proxy.isInOutage || NIODeadline.now() > before + .milliseconds(200))
    }

    // MARK: Through sockets

    /// (1) 4 MiB of random bytes go through the proxy to an echo server and back, with jitter
    /// larger than the delay between chunks, and come back intact and in order.
    @Test func tcpBytesArriveIntactAndInOrderThroughJitter() async throws {
        let ms = Self.millisecond
        try await withProxy(.init(delayNanoseconds: 2 * ms, jitterNanoseconds: 2 * ms, seed: 42)) { proxy, port, _ in
            let payload = randomBytes(4 << 20, seed: 1)
            let client = try await TCPTestClient.connect(port: port)
            try await client.send(payload)
            #expect(try await waitUntil(timeout: .seconds(60)) { client.inbox.count >= payload.count })
            #expect(client.inbox.bytes == payload)
            let statistics = proxy.statistics
            #expect(statistics.toUpstream.tcpBytesForwarded == payload.count)
            #expect(statistics.toClients.tcpBytesForwarded == payload.count)
            #expect(statistics.tcpConnections == 1 && statistics.tcpUpstreamFailures == 0)
            try await client.channel.close()
        }
    }

    /// A client's half-close reaches the server behind its data; the server's answer and its
    /// close come back behind each other.
    @Test func halfCloseTravelsBehindTheData() async throws {
        let sink = try await ServerBootstrap(group: Self.group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(CountingSinkHandler()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let ms = Self.millisecond
        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: sink.localAddress!.port!,
                                    impairment: .init(delayNanoseconds: 1 * ms, jitterNanoseconds: 1 * ms), group: Self.group)
        let port = try await proxy.start()
        let client = try await TCPTestClient.connect(port: port)
        let payload = randomBytes(1 << 20, seed: 2)
        try await client.send(payload)
        try await client.channel.close(mode: .output)
        #expect(try await waitUntil { client.inbox.isClosed })
        var reply = ByteBuffer(bytes: client.inbox.bytes)
        #expect(reply.readInteger(as: UInt64.self) == UInt64(payload.count))
        try await proxy.stop()
        try await sink.close()
    }

    /// (2) Every UDP round trip takes at least both delays (the proxy never delivers early), and
    /// the typical one not much more than both delays plus jitter. The upper bound is on the
    /// median: on a loaded 2-core machine any single datagram can wait for a CPU far longer
    /// than the delays under test, but a proxy that added delay of its own would move them all.
    @Test func udpRoundTripCarriesTheDelayEachWay() async throws {
        let ms = Self.millisecond
        let slack: Duration = .milliseconds(100)
        func median(_ trips: [Duration]) -> Duration { trips.sorted()[trips.count / 2] }
        try await withProxy(.init(delayNanoseconds: 15 * ms)) { proxy, port, _ in
            let client = try await UDPTestClient.make(port: port)
            var sequence: UInt32 = 0
            var trips: [Duration] = []
            for _ in 0..<5 { trips.append(try await client.roundTrip(&sequence)) }
            #expect(trips.allSatisfy { $0 >= .milliseconds(30) }, "\(trips)")
            #expect(median(trips) <= .milliseconds(30) + slack, "\(trips)")
            proxy.setImpairment(.init(delayNanoseconds: 15 * ms, jitterNanoseconds: 10 * ms, seed: 5))
            trips = []
            for _ in 0..<20 { trips.append(try await client.roundTrip(&sequence)) }
            #expect(trips.allSatisfy { $0 >= .milliseconds(10) }, "\(trips)")
            #expect(median(trips) <= .milliseconds(50) + slack, "\(trips)")
            #expect(proxy.statistics.toUpstream.udpDatagramsForwarded == 25)
            #expect(proxy.statistics.toClients.udpDatagramsForwarded == 25)
            #expect(proxy.statistics.udpSessions == 1)
            try await client.channel.close()

            // TCP chunks get the same delays.
            let tcp = try await TCPTestClient.connect(port: port)
            trips = []
            for round in 1...3 {
                let sent = ContinuousClock.now
                try await tcp.send([UInt8(round)])
                #expect(try await waitUntil { tcp.inbox.count == round })
                trips.append(try #require(tcp.inbox.arrival(ofByte: round - 1)) - sent)
            }
            #expect(trips.allSatisfy { $0 >= .milliseconds(10) }, "\(trips)")
            #expect(median(trips) <= .milliseconds(50) + slack, "\(trips)")
            try await tcp.channel.close()
        }
    }

    /// A shared queue (`NetworkModel.sharedQueueBytes`): the stream's bytes drain through it at
    /// the model's rate, and a datagram that arrives while they do waits behind them, up to the
    /// queue's size at that rate: a relay whose one queue carries the audio and the clock alike.
    @Test func datagramsWaitBehindTheStreamInASharedQueue() async throws {
        let ms = Self.millisecond
        var model = NetworkModel(name: "one queue")
        model.toRoom.jitter = .uniform(maxNanoseconds: 0)
        model.toHouse.jitter = .uniform(maxNanoseconds: 0)
        model.sharedQueueBytes = 64 << 10
        model.queueBytesPerSecond = 1_000_000
        var impairment = ImpairmentProxy.Impairment(delayNanoseconds: 1 * ms)
        impairment.network = model
        try await withProxy(impairment) { proxy, port, _ in
                let udp = try await UDPTestClient.make(port: port)
            var sequence: UInt32 = 0
            let idle = try await udp.roundTrip(&sequence)
            #expect(idle >= .milliseconds(2))
            let tcp = try await TCPTestClient.connect(port: port)
            let payload = randomBytes(2 << 20, seed: 3)
            let sent = ContinuousClock.now
            try await tcp.send(payload)
            // Once the echo is on its way back, both ways' queues hold the rest of the 2 MiB.
            #expect(try await waitUntil { tcp.inbox.count > 0 })
            var behind: [Duration] = []
            for _ in 0..<3 { behind.append(try await udp.roundTrip(&sequence)) }
            #expect(try await waitUntil(timeout: .seconds(60)) { tcp.inbox.count >= payload.count })
            #expect(tcp.inbox.bytes == payload)
            let transfer = try #require(tcp.inbox.arrival(ofByte: payload.count - 1)) - sent
            print("shared queue: idle round trip \(idle), behind the stream \(behind), 2 MiB echoed in \(transfer)")
            // 2 MiB at 1 MB/s: at least 2.1 s, each way (the ways overlap).
            #expect(transfer >= .milliseconds(2090), "the stream was not held to the queue's rate")
            // The way to the server waits the queue's 64 KiB at 1 MB/s (65.5 ms) while the stream
            // fills it. (The echo comes back at the rate the way out delivers it, which the way
            // back drains as fast: its queue stays short.)
            #expect(behind.allSatisfy { $0 >= .milliseconds(65) }, "\(behind)")
            // The model is the proxy's, intact (a copy of it out of the link's lock once lost its
            // last field: `ImpairmentLink.impairment`).
            #expect(proxy.impairment.network == model)
            try await tcp.channel.close()
            try await udp.channel.close()
        }
    }

    /// (3) Loss 0.5 each way drops about half each way (binomial bounds, ±6σ), and the same
    /// seed drops the same datagrams.
    @Test func udpLossDropsAboutHalfReproducibly() async throws {
        let count = 400
        let first = try await lossTrial(seed: 7, count: count)
        let k = first.upstream.count
        #expect((140...260).contains(k), "\(k) of \(count) reached the server")
        let back = first.back.count
        let sigma = (Double(k) / 4).squareRoot()
        #expect(abs(Double(back) - Double(k) / 2) <= 6 * sigma, "\(back) of \(k) came back")
        #expect(first.back.isSubset(of: first.upstream))
        #expect(first.statistics.toUpstream.udpDatagramsLost == count - k)
        #expect(first.statistics.toClients.udpDatagramsLost == k - back)

        let again = try await lossTrial(seed: 7, count: count)
        #expect(again.upstream == first.upstream && again.back == first.back)
        let other = try await lossTrial(seed: 8, count: count)
        #expect(other.upstream != first.upstream)
    }

    /// (4) During an outage UDP datagrams vanish and TCP bytes wait; when it ends the TCP
    /// bytes arrive intact, the connection still open.
    ///
    /// The outage is 1 s, unless the five datagrams did not all reach the proxy within it (a
    /// loaded machine): then the trial is repeated with a window four times longer, so the
    /// assertions are always about datagrams that arrived while the link was down.
    @Test func outageDropsUDPAndHoldsTCP() async throws {
        try await withProxy(.init(delayNanoseconds: Self.millisecond)) { proxy, port, servers in
            let tcp = try await TCPTestClient.connect(port: port)
            try await tcp.send([1, 2, 3])
            #expect(try await waitUntil { tcp.inbox.count == 3 })
            let udp = try await UDPTestClient.make(port: port)
            var sequence: UInt32 = 0
            _ = try await udp.roundTrip(&sequence)

            var window: Int64 = 1_000_000_000
            var heldBack = UInt32(1000)..<1005
            var outageStart = ContinuousClock.now
            var droppedBefore = 0
            while true {
                let before = proxy.statistics.toUpstream
                droppedBefore = before.udpDatagramsDroppedByOutage
                outageStart = ContinuousClock.now
                proxy.startOutage(durationNanoseconds: window)
                for s in heldBack { try await udp.send(sequence: s) }
                #expect(try await waitUntil { proxy.statistics.toUpstream.udpDatagramsHandled >= before.udpDatagramsHandled + 5 })
                if proxy.isInOutage { break }
                try #require(window < 64_000_000_000, "five datagrams never reached the proxy within one outage")
                #expect(try await waitUntil(timeout: .seconds(120)) { !proxy.isInOutage })
                window *= 4
                heldBack = heldBack.upperBound..<(heldBack.upperBound + 5)
            }
            let payload = randomBytes(256 << 10, seed: 3)
            try await tcp.send(payload)

            #expect(try await waitUntil(timeout: .seconds(180)) { tcp.inbox.count == 3 + payload.count })
            let firstHeld = try #require(tcp.inbox.arrival(ofByte: 3))
            #expect(firstHeld - outageStart >= .nanoseconds(window))
            #expect(Array(tcp.inbox.bytes.dropFirst(3)) == payload)
            #expect(!tcp.inbox.isClosed)
            #expect(!proxy.isInOutage)

            _ = try await udp.roundTrip(&sequence)
            #expect(!servers.udpLog.sequences.contains { heldBack.contains($0) })
            #expect(!udp.log.sequences.contains { heldBack.contains($0) })
            let statistics = proxy.statistics
            #expect(statistics.toUpstream.udpDatagramsDroppedByOutage - droppedBefore == 5)
            #expect(statistics.toUpstream.tcpBytesForwarded == 3 + payload.count)
            #expect(statistics.tcpConnections == 1)
            try await tcp.channel.close()
        }
    }

    /// (5) An upstream that refuses connections gets the client's connection closed, nothing
    /// more; once the upstream is there, the next connection works.
    @Test func refusedUpstreamClosesTheClientAndTheProxyCarriesOn() async throws {
        let probe = try await ServerBootstrap(group: Self.group).bind(host: "127.0.0.1", port: 0).get()
        let upstreamPort = probe.localAddress!.port!
        try await probe.close()

        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: upstreamPort, group: Self.group)
        let port = try await proxy.start()
        let refused = try await TCPTestClient.connect(port: port)
        try? await refused.send(Array("hello?".utf8))
        #expect(try await waitUntil { refused.inbox.isClosed })
        #expect(refused.inbox.count == 0)
        #expect(proxy.statistics.tcpUpstreamFailures == 1)
        // A client that leaves at once, and UDP into the void: nothing breaks.
        let quitter = try await TCPTestClient.connect(port: port)
        try? await quitter.channel.close()  // the proxy may have closed it first (upstream refused)
        let udp = try await UDPTestClient.make(port: port)
        try await udp.send(sequence: 1)

        let servers = try await EchoServers.start(port: upstreamPort)
        let client = try await TCPTestClient.connect(port: port)
        try await client.send(Array("hello".utf8))
        #expect(try await waitUntil { client.inbox.count == 5 })
        #expect(client.inbox.bytes == Array("hello".utf8))
        var sequence: UInt32 = 10
        _ = try await udp.roundTrip(&sequence)
        #expect(proxy.statistics.tcpConnections >= 3)

        try await client.channel.close()
        try await udp.channel.close()
        try await proxy.stop()
        await servers.stop()
    }

    // MARK: Harness

    static let group = MultiThreadedEventLoopGroup.singleton

    private struct LossTrial {
        var upstream: Set<UInt32>
        var back: Set<UInt32>
        var statistics: ImpairmentProxy.Statistics
    }

    /// Sends `count` numbered datagrams through a lossy proxy, in batches that the proxy has
    /// seen before the next goes (so the kernel never drops any), and waits until every
    /// survivor has been echoed and every echo decided on.
    private func lossTrial(seed: UInt64, count: Int) async throws -> LossTrial {
        try await withProxy(.init(udpLossProbability: 0.5, seed: seed)) { proxy, port, servers in
            let client = try await UDPTestClient.make(port: port)
            for batch in stride(from: 0, to: count, by: 25) {
                for s in batch..<min(count, batch + 25) { try await client.send(sequence: UInt32(s)) }
                let sent = min(count, batch + 25)
                #expect(try await waitUntil { proxy.statistics.toUpstream.udpDatagramsHandled == sent })
            }
            #expect(try await waitUntil {
                let s = proxy.statistics
                return servers.udpLog.count == s.toUpstream.udpDatagramsForwarded
                    && s.toClients.udpDatagramsHandled == s.toUpstream.udpDatagramsForwarded
                    && client.log.count == s.toClients.udpDatagramsForwarded
            })
            try await client.channel.close()
            return LossTrial(upstream: Set(servers.udpLog.sequences), back: Set(client.log.sequences), statistics: proxy.statistics)
        }
    }

    /// Echo servers, a proxy in front of them, the body, then everything closed (also on failure).
    private func withProxy<T>(_ impairment: ImpairmentProxy.Impairment,
                              _ body: (ImpairmentProxy, Int, EchoServers) async throws -> T) async throws -> T {
        let servers = try await EchoServers.start()
        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: servers.port, impairment: impairment, group: Self.group)
        do {
            let port = try await proxy.start()
            let result = try await body(proxy, port, servers)
            try await proxy.stop()
            await servers.stop()
            return result
        } catch {
            try? await proxy.stop()
            await servers.stop()
            throw error
        }
    }
}

// MARK: - Test servers and clients

/// Polls `condition` until it holds or `timeout` passes; the timeout is only a guard.
private func waitUntil(timeout: Duration = .seconds(30), _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: .milliseconds(1))
    }
    return true
}

private func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var random = SplitMix64(seed: seed)
    var words = (0..<(count + 7) / 8).map { _ in random.next() }
    return words.withUnsafeMutableBytes { Array($0.prefix(count)) }
}

/// A TCP echo server and a UDP echo server on one port number, like Tutti's server.
private final class EchoServers: Sendable {
    let tcp: any Channel
    let udp: any Channel
    let udpLog: DatagramLog
    var port: Int { tcp.localAddress!.port! }

    private init(tcp: any Channel, udp: any Channel, udpLog: DatagramLog) {
        self.tcp = tcp
        self.udp = udp
        self.udpLog = udpLog
    }

    /// Port 0: an ephemeral TCP port whose UDP twin is free.
    static func start(port: Int = 0) async throws -> EchoServers {
        let log = DatagramLog()
        var lastError: (any Error)?
        for _ in 0..<16 {
            let tcp = try await ServerBootstrap(group: ImpairmentProxyTests.group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(TCPEchoHandler()) }
                }
                .bind(host: "127.0.0.1", port: port).get()
            do {
                let udp = try await DatagramBootstrap(group: ImpairmentProxyTests.group)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(UDPEchoHandler(log: log)) }
                    }
                    .bind(host: "127.0.0.1", port: tcp.localAddress!.port!).get()
                return EchoServers(tcp: tcp, udp: udp, udpLog: log)
            } catch {
                lastError = error
                try? await tcp.close()
                if port != 0 { break }
            }
        }
        throw lastError!
    }

    func stop() async {
        try? await tcp.close()
        try? await udp.close()
    }
}

private final class TCPEchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.write(data, promise: nil) }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

/// Counts what it receives; at the client's half-close answers with the count and closes.
private final class CountingSinkHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var count: UInt64 = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { count += UInt64(Self.unwrapInboundIn(data).readableBytes) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else { return }
        var buffer = context.channel.allocator.buffer(capacity: 8)
        buffer.writeInteger(count)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

private final class UDPEchoHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    let log: DatagramLog
    init(log: DatagramLog) { self.log = log }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        log.record(envelope.data)
        context.writeAndFlush(Self.wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: envelope.data)), promise: nil)
    }
}

/// Datagrams received, each starting with a big-endian UInt32 sequence number.
private final class DatagramLog: Sendable {
    private let entries = Mutex<[(sequence: UInt32, at: ContinuousClock.Instant)]>([])

    func record(_ data: ByteBuffer) {
        let now = ContinuousClock.now
        guard let sequence = data.getInteger(at: data.readerIndex, as: UInt32.self) else { return }
        entries.withLock { $0.append((sequence, now)) }
    }

    var count: Int { entries.withLock { $0.count } }
    var sequences: [UInt32] { entries.withLock { $0.map(\.sequence) } }
    func arrival(of sequence: UInt32) -> ContinuousClock.Instant? { entries.withLock { $0.first { $0.sequence == sequence }?.at } }
}

private final class UDPTestClient: Sendable {
    let channel: any Channel
    let log: DatagramLog
    let proxy: SocketAddress

    static func make(port: Int) async throws -> UDPTestClient {
        let log = DatagramLog()
        let channel = try await DatagramBootstrap(group: ImpairmentProxyTests.group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(DatagramRecorder(log: log)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return UDPTestClient(channel: channel, proxy: try SocketAddress(ipAddress: "127.0.0.1", port: port), log: log)
    }

    private init(channel: any Channel, proxy: SocketAddress, log: DatagramLog) {
        self.channel = channel
        self.proxy = proxy
        self.log = log
    }

    func send(sequence: UInt32) async throws {
        var buffer = channel.allocator.buffer(capacity: 34)
        buffer.writeInteger(sequence)
        buffer.writeRepeatingByte(0xAB, count: 30)
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: proxy, data: buffer)).get()
    }

    /// Sends the next sequence number and waits for its echo; the time from send to arrival.
    func roundTrip(_ sequence: inout UInt32) async throws -> Duration {
        sequence += 1
        let s = sequence
        let sent = ContinuousClock.now
        try await send(sequence: s)
        #expect(try await waitUntil { self.log.arrival(of: s) != nil }, "no echo of \(s)")
        return (log.arrival(of: s) ?? .now) - sent
    }

    private final class DatagramRecorder: ChannelInboundHandler {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let log: DatagramLog
        init(log: DatagramLog) { self.log = log }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { log.record(Self.unwrapInboundIn(data).data) }
    }
}

/// What a TCP client received, with the time each chunk arrived.
private final class ByteInbox: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var chunks: [(end: Int, at: ContinuousClock.Instant)] = []
        var closed = false
    }
    private let state = Mutex(State())

    func append(_ buffer: ByteBuffer) {
        let now = ContinuousClock.now
        state.withLock { s in
            s.bytes += buffer.readableBytesView
            s.chunks.append((s.bytes.count, now))
        }
    }

    func markClosed() { state.withLock { $0.closed = true } }
    var count: Int { state.withLock { $0.bytes.count } }
    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var isClosed: Bool { state.withLock { $0.closed } }
    /// When the byte at `index` (0-based) arrived.
    func arrival(ofByte index: Int) -> ContinuousClock.Instant? { state.withLock { $0.chunks.first { $0.end > index }?.at } }
}

private final class TCPTestClient: Sendable {
    let channel: any Channel
    let inbox: ByteInbox

    private init(channel: any Channel, inbox: ByteInbox) {
        self.channel = channel
        self.inbox = inbox
    }

    static func connect(port: Int) async throws -> TCPTestClient {
        let inbox = ByteInbox()
        let channel = try await ClientBootstrap(group: ImpairmentProxyTests.group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(inbox: inbox)) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return TCPTestClient(channel: channel, inbox: inbox)
    }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
    }

    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let inbox: ByteInbox
        init(inbox: ByteInbox) { self.inbox = inbox }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { inbox.append(Self.unwrapInboundIn(data)) }
        func channelInactive(context: ChannelHandlerContext) { inbox.markClosed() }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}
