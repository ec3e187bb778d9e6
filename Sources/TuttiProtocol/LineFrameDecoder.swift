import NIOCore

/// Splits a connection's bytes into lines (without their `\n`), for the line protocols the
/// house speaks to other systems' clients (MPD, Snapcast's control API). A line longer than
/// `maximumLength` is an error that closes the connection, as MPD drops a client that sends one.
public struct LineFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer
    public let maximumLength: Int

    public init(maximumLength: Int) { self.maximumLength = maximumLength }

    public struct LineTooLong: Error {}

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let line = try Self.nextLine(from: &buffer, maximumLength: maximumLength) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }

    /// The next whole line of `buffer` (read past it and its `\n`), or nil when none has
    /// ended yet. The decoder's one rule, apart from NIO (`fuzz-lines` feeds it).
    /// - Throws: `LineTooLong` for a line, ended or not, longer than `maximumLength`.
    public static func nextLine(from buffer: inout ByteBuffer, maximumLength: Int) throws(LineTooLong) -> ByteBuffer? {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.readableBytes > maximumLength { throw LineTooLong() }
            return nil
        }
        let length = newline - buffer.readerIndex
        guard length <= maximumLength else { throw LineTooLong() }
        let line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        return line
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A last line without its newline is not a command.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}
