import NIOCore
import NIOHTTP1

/// Answers one connection's requests for `MediaHTTPServer`, one at a time: the HTTP pipeline
/// handler in front holds back pipelined requests until the current response has ended.
///
/// A body goes out in slices from the event loop, never blocking it: as much as the channel
/// takes before it stops being writable, or under a bandwidth limit what the server's shared
/// budget allows, looking again on a 10 ms timer. Stall and cut rules are checked between slices,
/// and a slice never runs past a rule's offset, so rules fire at the exact byte.
final class MediaHTTPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Small enough that writability and rule changes are looked at often.
    private static let maximumSlice = 16 * 1024
    /// How often a throttled body looks for bandwidth: the budget of one tick is bandwidth/100.
    private static let tick = TimeAmount.milliseconds(10)

    private struct Transfer {
        let path: String
        let file: ByteBuffer
        /// File offset of the next byte to send.
        var position: Int
        let end: Int
        let record: Int
        let keepAlive: Bool
    }

    private let shared: MediaHTTPServer.Shared
    private let connectionID: Int
    private var context: ChannelHandlerContext?
    private var requestHead: HTTPRequestHead?
    private var transfer: Transfer?
    /// A bandwidth tick or the end of a stall; while pending, nothing is sent.
    private var timer: Scheduled<Void>?
    /// Flushing or ending a response can call back into this handler (writability, the next
    /// pipelined request); such calls only ask the running pump for another round.
    private var pumping = false
    private var pumpAgain = false

    init(shared: MediaHTTPServer.Shared, connectionID: Int) {
        self.shared = shared
        self.connectionID = connectionID
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop(.connectionClosed)
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestHead = head
        case .body:
            break
        case .end:
            guard let head = requestHead else { return }
            requestHead = nil
            respond(to: head, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop(.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Protocol errors were answered by the error handler in front; what is left is I/O.
        context.close(promise: nil)
    }

    private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(request.uri.prefix { $0 != "?" })
        var answer = shared.answer(request, path: path, connectionID: connectionID)
        let keepAlive = request.isKeepAlive
        if !keepAlive {
            answer.head.headers.replaceOrAdd(name: "Connection", value: "close")
        } else if request.version == .http1_0 {
            answer.head.headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        if let body = answer.body {
            transfer = Transfer(path: path, file: body.file, position: body.range.lowerBound, end: body.range.upperBound,
                                record: answer.record, keepAlive: keepAlive)
            pump()
        } else {
            endResponse(keepAlive: keepAlive, context: context)
            context.flush()
        }
    }

    private func endResponse(keepAlive: Bool, context: ChannelHandlerContext) {
        if keepAlive {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            context.write(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func pump() {
        guard !pumping else {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            sendWhilePossible()
        } while pumpAgain
    }

    private func sendWhilePossible() {
        guard let context else { return }
        defer { context.flush() }
        while timer == nil, let current = transfer {
            if current.position == current.end {
                transfer = nil
                shared.finish(record: current.record, .completed)
                endResponse(keepAlive: current.keepAlive, context: context)
                continue
            }
            guard context.channel.isWritable else { return }
            switch shared.nextStep(record: current.record, path: current.path, position: current.position,
                                   end: current.end, maximum: Self.maximumSlice) {
            case .send(let count):
                transfer?.position += count
                let slice = current.file.getSlice(at: current.file.readerIndex + current.position, length: count)!
                context.write(wrapOutboundOut(.body(.byteBuffer(slice))), promise: nil)
            case .wait:
                schedule(in: Self.tick, context: context)
            case .stall(let duration):
                schedule(in: duration, context: context)
            case .cut:
                transfer = nil
                shared.finish(record: current.record, .cut)
                // Closing drops writes still queued, so wait until everything before the cut
                // point is on the wire: the client must see exactly the bytes up to it.
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))))
                    .whenComplete { _ in channel.close(promise: nil) }
                return
            }
        }
    }

    private func schedule(in delay: TimeAmount, context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            timer = nil
            pump()
        }
    }

    private func stop(_ outcome: MediaHTTPServer.RequestRecord.Outcome) {
        timer?.cancel()
        timer = nil
        if let current = transfer {
            transfer = nil
            shared.finish(record: current.record, outcome)
        }
    }
}

/// A request's `Range` header resolved against a file length. Only a single range is
/// honoured; anything else a server may ignore (RFC 9110 §14.2) is answered with the whole file.
enum ByteRangeRequest: Equatable {
    case whole
    case part(Range<Int>)
    case unsatisfiable

    init(header: String?, length: Int) {
        guard let header else { self = .whole; return }
        let value = header.trimmingWhitespace
        guard value.lowercased().hasPrefix("bytes=") else { self = .whole; return }
        let spec = value.dropFirst("bytes=".count).trimmingWhitespace
        let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard !spec.contains(","), bounds.count == 2 else { self = .whole; return }
        let first = Self.number(bounds[0]), last = Self.number(bounds[1])
        switch (bounds[0].isEmpty, bounds[1].isEmpty) {
        case (true, false):
            guard let suffix = last else { self = .whole; return }
            guard suffix > 0, length > 0 else { self = .unsatisfiable; return }
            self = .part(max(0, length - suffix)..<length)
        case (false, true):
            guard let start = first else { self = .whole; return }
            self = start < length ? .part(start..<length) : .unsatisfiable
        case (false, false):
            guard let start = first, let end = last, end >= start else { self = .whole; return }
            self = start < length ? .part(start..<(min(end, length - 1) + 1)) : .unsatisfiable
        case (true, true):
            self = .whole
        }
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }
}

private extension StringProtocol {
    var trimmingWhitespace: Substring {
        let trimmed = drop { $0 == " " || $0 == "\t" }
        var end = trimmed.endIndex
        while end > trimmed.startIndex, [" ", "\t"].contains(trimmed[trimmed.index(before: end)]) {
            end = trimmed.index(before: end)
        }
        return Substring(trimmed[..<end])
    }
}
