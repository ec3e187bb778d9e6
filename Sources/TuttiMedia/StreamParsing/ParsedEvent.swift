/// What `AudioStreamParser` reports, in stream order: the description once (before the first
/// packet; again if a chained Ogg stream starts a new logical stream), then packets.
public enum ParsedEvent: Sendable, Hashable {
    case format(StreamDescription)
    case packet(StreamPacket)
}
