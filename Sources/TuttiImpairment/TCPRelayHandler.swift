import NIOCore
import TuttiCore

/// One side of a proxied TCP connection. Each of the two channels (accepted client, upstream)
/// has one; a handler takes what its own channel reads and delivers it to its partner's channel
/// after the impairment's delay, in order: a chunk leaves at
/// max(previous chunk's time, arrival + delay + jitter sample). During an outage nothing leaves;
/// the bytes wait (in order) and go out when it ends, like a stalled link whose TCP retransmits.
///
/// Backpressure: a handler stops reading its channel while it holds `highWaterBytes`
/// undelivered, or while its partner's channel is not writable, and reads again when that
/// clears. It holds every read until it is linked to its partner (the upstream connected).
/// End of input (half-close) and closure travel behind the data, with the same delay, and take
/// effect once the data before them has been written.
final class TCPRelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Undelivered bytes above which this side stops reading. Large enough for the
    /// bandwidth-delay product of a fast link with tens of milliseconds of delay.
    static let highWaterBytes = 4 << 20

    private enum Item {
        case data(ByteBuffer)
        /// The peer half-closed: shut the partner's output.
        case endOfInput
        /// The channel closed: close the partner.
        case closed
    }

    let direction: ImpairmentDirection
    private let link: ImpairmentLink
    private var random: SplitMix64
    private var context: ChannelHandlerContext?
    private var eventLoop: (any EventLoop)?
    private var partner: TCPRelayHandler?
    private var queue = CircularBuffer<(at: NIODeadline, item: Item)>()
    private var queuedBytes = 0
    private var lastDelivery = NIODeadline.uptimeNanoseconds(0)
    private var lastWrite: EventLoopFuture<Void>?
    private var timer: Scheduled<Void>?
    private var readHeld = false
    /// Nothing more will be read from this channel (end of input or closed).
    private var inputFinished = false
    /// This handler's channel went inactive.
    private(set) var isClosed = false

    init(direction: ImpairmentDirection, link: ImpairmentLink, random: SplitMix64) {
        self.direction = direction
        self.link = link
        self.random = random
    }

    /// Connects the two sides and starts reading. Both channels are on the same event loop.
    func link(to partner: TCPRelayHandler) {
        self.partner = partner
        resumeReadingIfPossible()
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        eventLoop = context.eventLoop
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // The channel closed. What is queued for the partner still goes out (then closes it).
        self.context = nil
    }

    func read(context: ChannelHandlerContext) {
        if readAllowed {
            context.read()
        } else {
            readHeld = true
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !inputFinished else { return }
        var buffer = Self.unwrapInboundIn(data)
        if direction == .toClient { link.tapToClient(&buffer) }
        enqueue(.data(buffer))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event, !inputFinished {
            inputFinished = true
            enqueue(.endOfInput)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        partner?.resumeReadingIfPossible()
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosed = true
        inputFinished = true
        // What the partner still holds for this channel can no longer be delivered.
        partner?.targetClosed()
        enqueue(.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or the like: close this side; the closure reaches the partner in order.
        context.close(promise: nil)
    }

    // MARK: Delivery

    private var readAllowed: Bool {
        guard let partner, !inputFinished, queuedBytes < Self.highWaterBytes,
              let target = partner.context else { return false }
        return target.channel.isWritable
    }

    private func resumeReadingIfPossible() {
        guard readHeld, readAllowed, let context else { return }
        readHeld = false
        context.read()
    }

    private func enqueue(_ item: Item) {
        guard partner != nil else { return }
        if case .data(let buffer) = item { queuedBytes += buffer.readableBytes }
        let now = NIODeadline.now()
        var at = now + .nanoseconds(link.sampleDelay(direction, at: now, random: &random))
        if case .data(let buffer) = item { at = link.streamArrival(direction, bytes: buffer.readableBytes, at: now, due: at) }
        if at < lastDelivery { at = lastDelivery }
        lastDelivery = at
        queue.append((at, item))
        if timer == nil { arm(at) }
    }

    private func arm(_ deadline: NIODeadline) {
        guard let eventLoop else { return }
        timer = eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            deliverDue()
        }
    }

    private func deliverDue() {
        guard let partner, let target = partner.context else { return dropQueue() }
        let now = NIODeadline.now()
        if let end = link.outageEnd(at: now) {
            arm(end)
            return
        }
        let counters = link.counters(direction)
        var unflushed = false
        while let head = queue.first, head.at <= now {
            queue.removeFirst()
            switch head.item {
            case .data(let buffer):
                queuedBytes -= buffer.readableBytes
                counters.tcpBytes.add(buffer.readableBytes, ordering: .relaxed)
                let written = target.eventLoop.makePromise(of: Void.self)
                target.write(NIOAny(buffer), promise: written)
                lastWrite = written.futureResult
                unflushed = true
            case .endOfInput, .closed:
                if unflushed { target.flush(); unflushed = false }
                // Shut the partner only once everything before has been written: a full close
                // (or a half-close escalating to one) would discard pending writes.
                let channel = target.channel
                let mode: CloseMode = if case .closed = head.item { .all } else { .output }
                if let lastWrite {
                    lastWrite.assumeIsolated().whenComplete { _ in channel.close(mode: mode, promise: nil) }
                } else {
                    channel.close(mode: mode, promise: nil)
                }
            }
        }
        if unflushed { target.flush() }
        if let next = queue.first, timer == nil { arm(next.at) }
        resumeReadingIfPossible()
    }

    /// The partner's channel closed: drop what was meant for it and let go of the partner.
    private func targetClosed() {
        dropQueue()
        partner = nil
    }

    private func dropQueue() {
        timer?.cancel()
        timer = nil
        queue.removeAll()
        queuedBytes = 0
    }
}
