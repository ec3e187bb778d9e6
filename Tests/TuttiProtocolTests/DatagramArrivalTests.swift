import NIOCore
import Synchronization
import NIOEmbedded
import NIOPosix
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation

/// Clock sync stamps a datagram's arrival with the kernel's receive time, not with when its
/// event loop got to it: a reply that waits behind other work must not look late.
@Suite struct DatagramArrivalTests {
    /// Answers the first datagram (the warm-up) at `warmedUp`, and records the second's arrival
    /// stamp and when it was handled at `stamps`.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = StampedDatagram
        let warmedUp: EventLoopPromise<Void>
        let stamps: EventLoopPromise<(arrival: Int64, handled: Int64)>
        var count = 0
        init(warmedUp: EventLoopPromise<Void>, stamps: EventLoopPromise<(arrival: Int64, handled: Int64)>) {
            self.warmedUp = warmedUp
            self.stamps = stamps
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            count += 1
            if count == 1 { warmedUp.succeed() } else { stamps.succeed((Self.unwrapInboundIn(data).arrival, MonotonicClock().now())) }
        }
    }

    /// The receiving loop is busy for 60 ms when the datagram comes: the handler runs 60 ms
    /// later, and the stamp still says when it came.
    @Test(.timeLimit(.minutes(1)))
    func aBusyLoopDoesNotDelayTheStamp() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        do { try await measure(on: group) } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    private func measure(on group: MultiThreadedEventLoopGroup) async throws {
        let loops = Array(group.makeIterator())
        let receiverLoop = loops[0]
        let stamps = receiverLoop.makePromise(of: (arrival: Int64, handled: Int64).self)
        let warmedUp = receiverLoop.makePromise(of: Void.self)
        let receiver = try await DatagramBootstrap(group: receiverLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([DatagramArrivalStamper(clock: MonotonicClock()), Recorder(warmedUp: warmedUp, stamps: stamps)])
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let sender = try await DatagramBootstrap(group: loops[1]).bind(host: "127.0.0.1", port: 0).get()
        defer {
            receiver.close(promise: nil)
            sender.close(promise: nil)
        }
        // The kernel may turn stamping on only after the first request for it: a first datagram
        // makes sure it is on.
        try await sender.writeAndFlush(AddressedEnvelope(remoteAddress: receiver.localAddress!, data: sender.allocator.buffer(string: "warm-up"))).get()
        try await warmedUp.futureResult.get()
        // Occupy the receiver's loop; once it is busy, the sender's loop sends (both on event
        // loops, so nothing waits for the test's own thread), and the receiver stays busy for
        // 50 ms after the send.
        let sentAt = Atomic<Int64>(0)
        // The promise lives on the sender's loop, so what follows it runs there, not behind the
        // busy loop.
        let busy = loops[1].makePromise(of: Void.self)
        receiverLoop.execute {
            busy.succeed()
            let guardTime = MonotonicClock().now() + 5_000_000_000
            while true {
                let now = MonotonicClock().now()
                let sent = sentAt.load(ordering: .acquiring)
                if (sent != 0 && now > sent + 50_000_000) || now > guardTime { break }
            }
        }
        let destination = receiver.localAddress!
        let written = busy.futureResult.flatMap {
            sentAt.store(MonotonicClock().now(), ordering: .releasing)
            return sender.writeAndFlush(AddressedEnvelope(remoteAddress: destination, data: sender.allocator.buffer(string: "tick")))
        }
        try await written.get()
        let sent = sentAt.load(ordering: .acquiring)
        let (arrival, handled) = try await stamps.futureResult.get()
        // The loop got to it 50 ms later; the stamp is when it came (the kernel stamps it as the
        // send delivers it, on loopback). A stamp taken when the handler ran would be 50 ms on.
        #expect(handled - arrival > 40_000_000, "handled \(handled - arrival) ns after its stamp")
        #expect(arrival >= sent && arrival - sent < 5_000_000, "stamped \(arrival - sent) ns after sending")
    }

    /// A channel with no socket (a simulated link) has no kernel stamp: now is used.
    @Test func aChannelWithoutASocketIsStampedNow() throws {
        final class Last: ChannelInboundHandler {
            typealias InboundIn = StampedDatagram
            var arrival: Int64?
            func channelRead(context: ChannelHandlerContext, data: NIOAny) { arrival = Self.unwrapInboundIn(data).arrival }
        }
        let last = Last()
        let channel = EmbeddedChannel(handlers: [DatagramArrivalStamper(clock: ManualClock(startingAt: 42_000)), last])
        try channel.writeInbound(AddressedEnvelope(remoteAddress: try SocketAddress(ipAddress: "127.0.0.1", port: 9), data: ByteBuffer(string: "tick")))
        #expect(last.arrival == 42_000)
    }
}
