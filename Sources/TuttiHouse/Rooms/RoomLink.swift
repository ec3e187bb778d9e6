import NIOCore
import TuttiProtocol

/// A connected speaker, as the house sees it: its connection, what it says of itself, and how
/// far it has been sent its group's stream (`sender`). Belongs to the house's event loop.
final class RoomLink {
    /// The connection's id (the `welcome`'s client id); a room that reconnects gets a new one.
    let connectionID: UInt32
    let roomID: RoomID
    /// The room's name, kept in step with its record for logs and reports.
    var name: String
    /// The name its speaker says in its hello.
    let speakerName: String
    /// The latency it compensates: its speaker's, unless a controller set another.
    var latencyNanoseconds: Int64
    /// How long before a frame leaves its DAC the room commits it to its device (its hello).
    let outputLeadNanoseconds: Int64
    let channel: any Channel
    /// The identity its speaker proved in the handshake.
    let speakerKey: PeerKey?
    /// Where its audio chunks are written, framed once for every room.
    let chunkWriter: FramedChunkWriter
    var status: WireMessage.SpeakerStatus?
    var statusTime: Int64 = 0
    /// How far it has been sent a stream.
    var sender = RoomSender()

    /// How long before a frame is heard the room commits it: an anchor must reach it earlier.
    var commitmentNanoseconds: Int64 { outputLeadNanoseconds + latencyNanoseconds }

    init(connectionID: UInt32, roomID: RoomID, name: String, speakerName: String, latencyNanoseconds: Int64, outputLeadNanoseconds: Int64,
         channel: any Channel, chunkWriter: FramedChunkWriter, speakerKey: PeerKey? = nil) {
        self.speakerKey = speakerKey
        self.connectionID = connectionID
        self.roomID = roomID
        self.name = name
        self.speakerName = speakerName
        self.latencyNanoseconds = latencyNanoseconds
        self.outputLeadNanoseconds = outputLeadNanoseconds
        self.channel = channel
        self.chunkWriter = chunkWriter
    }

    func send(_ message: WireMessage) {
        channel.writeAndFlush(message, promise: nil)
    }
}

/// How far one room has been sent a stream: the cursors `GroupSession.pump` moves.
struct RoomSender {
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

    /// Forgets the stream, as when the room is told to flush all of it.
    mutating func reset() {
        streamID = nil
        sentUntilFrame = 0
        sentEnd = false
    }
}
