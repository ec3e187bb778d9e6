import NIOCore
import TuttiProtocol

/// Sending the group's stream to its rooms: each room's `RoomSender` cursors, moved as far as
/// its connection takes.
extension GroupSession {
    /// Sends `room` what it is missing of the group's stream, as far as its connection takes.
    func pump(_ room: RoomLink) {
        loop.preconditionInEventLoop()
        // The playhead moved: production may go on if it waited at the buffer depth (stepped
        // production steps on its own schedule).
        if !configuration.stepsProductionOnLoop { stream?.engine?.output.wake() }
        publishListening()
        guard let stream else { return }
        let channel = room.channel
        if room.sender.streamID != stream.id {
            room.sender.streamID = stream.id
            room.sender.sentEnd = false
            if let resume = room.sender.resume, resume.streamID == stream.id {
                room.sender.resume = nil
                resumeSending(to: room, from: resume, stream)
            } else {
                // A room joining a playing stream starts a little after the playhead.
                let startFrame = isHeard(stream) ? playhead() + frames(configuration.joinMarginNanoseconds) : playhead()
                (room.sender.nextChunk, room.sender.epoch) = stream.joinPoint(at: startFrame)
                room.sender.sentUntilFrame = startFrame
                channel.write(WireMessage.streamStart(.init(streamID: stream.id, codec: stream.codec.wireName, sampleRate: UInt32(stream.sampleRate),
                                                            channelCount: UInt8(stream.channelCount), codecHeader: stream.codecHeader,
                                                            epoch: UInt32(room.sender.epoch))), promise: nil)
                for anchor in stream.schedule.anchors { channel.write(WireMessage.anchor(wire(anchor, stream)), promise: nil) }
            }
        }
        // Queue edits cut the stream: the room drops its audio from each cut before it is sent
        // what follows.
        let (cuts, epoch) = stream.cuts(after: room.sender.epoch)
        for cut in cuts {
            channel.write(WireMessage.flush(.init(streamID: stream.id, fromFrame: cut.frame, epoch: UInt32(cut.epoch))), promise: nil)
            room.sender.nextChunk = min(room.sender.nextChunk, cut.chunkCount)
            room.sender.sentEnd = false
        }
        room.sender.epoch = epoch
        var limit = playhead() + frames(configuration.bufferDepthNanoseconds)
        if stream.schedule.anchors.isEmpty {
            // A start not anchored yet (`PendingStart`): only the first audio, so the anchor that
            // starts it does not queue behind seconds of audio on the way to the room.
            limit = min(limit, frames(configuration.readyAudioNanoseconds))
        }
        while channel.isWritable, let chunk = stream.chunk(at: room.sender.nextChunk, epoch: epoch) {
            if chunk.firstFrame > limit { break }
            room.chunkWriter.write(framed: chunk.wire)
            room.sender.nextChunk += 1
            room.sender.sentUntilFrame = chunk.endFrame
        }
        if !room.sender.sentEnd, let (end, count) = stream.end(epoch: epoch), room.sender.nextChunk >= count {
            channel.write(WireMessage.streamEnd(.init(streamID: stream.id, endFrame: end)), promise: nil)
            room.sender.sentEnd = true
        }
        channel.flush()
    }

    /// A room that reconnected holding audio of the current stream: it keeps what is still
    /// valid and is sent only what follows. Its stream header stays; the anchors are sent again
    /// (applying them twice changes nothing), and the cuts made since the last it saw reach it
    /// as flushes before any audio (`pump`).
    private func resumeSending(to room: RoomLink, from resume: WireMessage.Resume, _ stream: ServerStream) {
        // From the anchor in force: re-applying an older one would briefly leave the room a
        // schedule of that anchor alone.
        let anchors = stream.schedule.anchors
        let inForce = anchors.lastIndex { $0.serverTime <= now } ?? 0
        for anchor in anchors[inForce...] { room.channel.write(WireMessage.anchor(wire(anchor, stream)), promise: nil) }
        let epoch = min(Int(resume.epoch), stream.epoch)
        let firstCut = stream.cuts(after: epoch).cuts.map(\.frame).min() ?? .max
        // What it holds that no cut since has changed, and that was ever sent.
        let valid = resume.held.compactMap { range -> Range<Int64>? in
            let end = min(range.upperBound, firstCut, stream.producedEnd)
            return range.lowerBound < end ? range.lowerBound..<end : nil
        }
        let head = playhead()
        let resumeFrame: Int64
        if let playing = valid.first(where: { $0.contains(head) }) {
            resumeFrame = playing.upperBound
        } else {
            // It no longer holds what is heard now: it joins like a new room.
            resumeFrame = isHeard(stream) ? head + frames(configuration.joinMarginNanoseconds) : head
        }
        room.sender.nextChunk = stream.joinPoint(at: resumeFrame).chunk
        room.sender.epoch = epoch
        room.sender.sentUntilFrame = resumeFrame
        log("room \(room.name) resumes stream \(stream.id): it holds \(valid.map { "\($0.lowerBound)..<\($0.upperBound)" }.joined(separator: ", ")); sending from timeline frame \(resumeFrame)")
    }

    /// Whether the stream's audio is being heard now (a room joining now must start a little
    /// after the playhead), rather than paused or held for its start.
    func isHeard(_ stream: ServerStream) -> Bool {
        stream.schedule.anchor(atServer: now)?.isPlaying == true
    }

    /// A room that came into the group: it is sent the group's stream (joining a little after
    /// the playhead, in sync), and the group's anchors allow for its commitment from now on.
    func admit(_ room: RoomLink) {
        publishListening()
        pump(room)
        checkPendingStart()
    }

    /// A room that went out of the group: it drops the group's stream at once; the group's
    /// other rooms notice nothing.
    func release(_ room: RoomLink) {
        if let streamID = room.sender.streamID { flush(room, streamID: streamID) }
        room.sender.resume = nil
        publishListening()
        checkPendingStart()
    }
}
