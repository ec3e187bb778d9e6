import NIOCore
import TuttiProtocol

/// The sender's end of an RTSP connection: requests go out one at a time, each stamped with the
/// next `CSeq`, and each reply fulfils the oldest request's promise. A reply that cannot be read
/// (the receiver is a peer on the network) fails every request waiting and closes the
/// connection, whose framing is lost.
///
/// Confined to its channel's event loop.
final class RTSPClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RTSPRequest
    typealias OutboundOut = ByteBuffer

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private var parser = RTSPResponseParser()
    private var waiting: [(sequence: Int, promise: EventLoopPromise<RTSPResponse>)] = []
    private var nextSequence = 1
    /// Called once, on the loop, when the connection ends (the receiver closed it, or went away).
    var onClose: ((String) -> Void)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var request = unwrapOutboundIn(data)
        request.headers.insert(("CSeq", "\(nextSequence)"), at: 0)
        nextSequence += 1
        context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: request.encoded)), promise: promise)
    }

    /// Sends `request` and returns its reply.
    static func send(_ request: RTSPRequest, on channel: any Channel) -> EventLoopFuture<RTSPResponse> {
        let promise = channel.eventLoop.makePromise(of: RTSPResponse.self)
        channel.pipeline.handler(type: RTSPClientHandler.self).whenComplete { result in
            switch result {
            case .success(let handler):
                handler.waiting.append((handler.nextSequence, promise))
                channel.writeAndFlush(request).whenFailure { promise.fail($0) }
            case .failure(let error):
                promise.fail(error)
            }
        }
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        parser.append(buffer.readBytes(length: buffer.readableBytes) ?? [])
        do {
            while let response = try parser.next() {
                guard !waiting.isEmpty else {
                    fail(context: context, "a reply to no request (\(response.status) \(response.reason.prefix(40)))")
                    return
                }
                let (sequence, promise) = waiting.removeFirst()
                if let echoed = response[header: "CSeq"], echoed != "\(sequence)" {
                    promise.fail(Failure(description: "a reply with CSeq \(echoed.prefix(16)) to request \(sequence)"))
                    fail(context: context, "replies out of order")
                    return
                }
                promise.succeed(response)
            }
        } catch {
            fail(context: context, "an unreadable reply: \(error)")
        }
    }

    private func fail(context: ChannelHandlerContext, _ reason: String) {
        for (_, promise) in waiting { promise.fail(Failure(description: reason)) }
        waiting.removeAll()
        onClose?(reason)
        onClose = nil
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        for (_, promise) in waiting { promise.fail(Failure(description: "the receiver closed the connection")) }
        waiting.removeAll()
        onClose?("the receiver closed the connection")
        onClose = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context: context, "\(error)")
    }
}
