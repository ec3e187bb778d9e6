import NIOCore

/// Splits a connection's bytes into lines (without their `\n`). A line longer than
/// `maximumLength` is an error that closes the connection, as MPD drops a client that sends one.
struct MPDLineDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    let maximumLength: Int

    struct LineTooLong: Error {}

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.readableBytes > maximumLength { throw LineTooLong() }
            return .needMoreData
        }
        let length = newline - buffer.readerIndex
        guard length <= maximumLength else { throw LineTooLong() }
        let line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A last line without its newline is not a command.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}
