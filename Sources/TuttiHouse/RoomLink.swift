import NIOCore
import TuttiProtocol

/// A connected speaker, as the house sees it. Belongs to the house's event loop.
final class RoomLink {
    let id: UInt32
    /// The room's name: what its speaker said, unless a controller renamed it.
    var name: String
    /// The name its speaker says in its hello.
    let speakerName: String
    /// The latency it compensates: its speaker's, unless a controller set another.
    var latencyNanoseconds: Int64
    /// How long before a frame leaves its DAC the room commits it to its device (its hello).
    let outputLeadNanoseconds: Int64
    let channel: any Channel
    /// Where its audio chunks are written, framed once for every room.
    let chunkWriter: FramedChunkWriter
    var status: WireMessage.SpeakerStatus?
    var statusTime: Int64 = 0
    /// The stream this room has been started on, and the next chunk to send it.
    var streamID: UInt32?
    var nextChunk = 0
    /// The stream epoch the room has been brought to (the cuts it was told of).
    var epoch = 0
    var sentEnd = false
    /// Timeline frames the room has been sent (for the fill rate).
    var sentUntilFrame: Int64 = 0
    /// What the room said it holds when it connected, until the house has resumed it.
    var resume: WireMessage.Resume?

    /// How long before a frame is heard the room commits it: an anchor must reach it earlier.
    var commitmentNanoseconds: Int64 { outputLeadNanoseconds + latencyNanoseconds }

    init(id: UInt32, name: String, speakerName: String? = nil, latencyNanoseconds: Int64, outputLeadNanoseconds: Int64 = 0, channel: any Channel,
         chunkWriter: FramedChunkWriter) {
        self.id = id
        self.name = name
        self.speakerName = speakerName ?? name
        self.latencyNanoseconds = latencyNanoseconds
        self.outputLeadNanoseconds = outputLeadNanoseconds
        self.channel = channel
        self.chunkWriter = chunkWriter
    }
}
