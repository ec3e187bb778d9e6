import Foundation
import Synchronization
import TuttiCore
import TuttiMedia
import TuttiProtocol
import TuttiEngine

/// The house's timeline output: the playback engine (`QueueProducer`) writes the queue's
/// frames here, and they become a `ServerStream`'s encoded chunks, produced as fast as decoding
/// allows up to `depthFrames` ahead of the playhead (enhanced buffering).
///
/// The edit horizon is the frame the rooms will hear `editLeadNanoseconds` from now (the
/// stream's published lead: `House.Configuration.editLeadNanoseconds` plus the largest room
/// latency), so an edit takes effect as soon as every room can still cut on that frame; a cut
/// becomes a `flush(from:)` the house sends each room before any audio after it.
///
/// Thread-safety: the producer thread only, except `wake()`.
final class StreamTimelineOutput: QueueTimelineOutput, @unchecked Sendable {
    private let stream: ServerStream
    private let encoder: ChunkEncoder
    private let chunkFrames: Int
    private let depthFrames: Int64
    private let clock: any HostClock
    private let notify: @Sendable () -> Void
    private let wakeSignal = WakeSignal()
    /// The stream's epoch this output writes under (it moves on with each cut it makes).
    private var epoch: Int
    /// Frames taken but not yet encoded (less than a chunk), starting at `pendingStart`.
    private var pending: [Float] = []
    private var pendingStart: Int64
    private var packet: [UInt8] = []
    /// Where items start and the bits their samples keep on the wire (`TrackInfo.wireBits`),
    /// in timeline order; a chunk keeps the most of the items it holds.
    private var sourceBits: [(fromFrame: Int64, bits: Int)] = []

    /// - Parameter notify: called (on the producer thread) when chunks, a cut or the end were
    ///   added, so the house sends them to the rooms.
    init(stream: ServerStream, encoder: ChunkEncoder, chunkFrames: Int, depthFrames: Int64, clock: any HostClock,
         notify: @escaping @Sendable () -> Void) {
        self.stream = stream
        self.encoder = encoder
        self.chunkFrames = chunkFrames
        self.depthFrames = depthFrames
        self.clock = clock
        self.notify = notify
        epoch = stream.epoch
        pendingStart = stream.producedEnd
    }

    private var channels: Int { stream.channelCount }

    var writtenFrames: Int64 { pendingStart + Int64(pending.count / channels) }

    var editHorizon: Int64 {
        let listening = stream.listening.withLock { $0 }
        return listening.schedule.heardFrame(atServer: clock.now() + listening.editLeadNanoseconds)
    }

    private var playhead: Int64 {
        stream.listening.withLock { $0.schedule }.heardFrame(atServer: clock.now())
    }

    func write(_ samples: UnsafePointer<Float>, frames: Int) -> Int {
        if writtenFrames - playhead > depthFrames { return 0 }
        pending.append(contentsOf: UnsafeBufferPointer(start: samples, count: frames * channels))
        var emitted = false
        while pending.count >= chunkFrames * channels {
            emitChunk(frames: chunkFrames)
            emitted = true
        }
        if emitted { notify() }
        return frames
    }

    /// Notes that the item starting at `frame` keeps `bits` significant bits (producer thread,
    /// before any of its frames are encoded). An item reported again (it ended, or was cut)
    /// replaces its entry; items after a cut are forgotten by the cut.
    func noteSourceBits(_ bits: Int, fromFrame frame: Int64) {
        sourceBits.removeAll { $0.fromFrame >= frame }
        sourceBits.append((frame, bits))
        // Only the entry in force at the oldest frame not yet encoded is needed from the past.
        if let inForce = sourceBits.lastIndex(where: { $0.fromFrame <= pendingStart }), inForce > 0 {
            sourceBits.removeFirst(inForce)
        }
    }

    /// The most significant bits any item in `start ..< start + count` keeps (full depth before
    /// the first item is known).
    private func significantBits(from start: Int64, count: Int) -> Int {
        let end = start + Int64(count)
        var bits = 0
        for (index, entry) in sourceBits.enumerated() where entry.fromFrame < end {
            let entryEnd = index + 1 < sourceBits.count ? sourceBits[index + 1].fromFrame : Int64.max
            if entryEnd > start { bits = max(bits, entry.bits) }
        }
        return bits == 0 ? ChunkEncoder.streamBits : bits
    }

    private func emitChunk(frames count: Int) {
        let bits = significantBits(from: pendingStart, count: count)
        do {
            try pending.withUnsafeBufferPointer { (samples: UnsafeBufferPointer<Float>) throws(MediaError) in
                try encoder.encode(samples.baseAddress!, frames: count, significantBits: bits, into: &packet)
            }
        } catch {
            // Our own encoder failing is a broken invariant, not bad input.
            fatalError("stream encoder failed: \(error)")
        }
        stream.append(ServerChunk(streamID: stream.id, firstFrame: pendingStart, frameCount: count, payload: packet), epoch: epoch)
        pendingStart += Int64(count)
        pending.removeFirst(count * channels)
    }

    func truncate(from frame: Int64) -> Int64 {
        if frame >= pendingStart {
            let keep = Int(min(frame - pendingStart, Int64(pending.count / channels)))
            pending.removeSubrange((keep * channels)...)
        } else {
            pending.removeAll(keepingCapacity: true)
            pendingStart = frame
        }
        epoch = stream.truncate(at: frame)
        notify()
        return frame
    }

    func waitForSpace(timeoutNanoseconds: Int64, evenIfWritable: Bool) {
        wakeSignal.prepareToWait()
        if !evenIfWritable && writtenFrames - playhead <= depthFrames {
            wakeSignal.signal()
            return
        }
        // The house wakes the producer whenever it sends to the rooms (the playhead moved) and
        // on every edit, so a longer wait costs nothing.
        wakeSignal.wait(timeoutNanoseconds: max(timeoutNanoseconds, 200_000_000))
    }

    func wake() { wakeSignal.signal() }

    /// While the end is still beyond the edit horizon, an edit can continue the stream there.
    var awaitsEditsAfterEnd: Bool { writtenFrames > editHorizon }

    func queueRanOut() {
        if !pending.isEmpty { emitChunk(frames: pending.count / channels) }
        stream.finish(at: writtenFrames, epoch: epoch)
        notify()
    }

    func finish() {}
}

extension TimelineSchedule {
    /// The timeline frame heard at server time `time` (frozen while paused; before the first
    /// anchor, its frame).
    func heardFrame(atServer time: Int64) -> Int64 {
        if let position = position(atServer: time) { return position.frame }
        return anchor(atServer: time)?.timelineFrame ?? anchors.first?.timelineFrame ?? 0
    }
}
