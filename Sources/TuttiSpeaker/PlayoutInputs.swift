import Synchronization
import TuttiCore
import TuttiStreamAudio
import TuttiProtocol

/// Everything a speaker's playout needs from the network side, updated by the connection and
/// read by the engine once per block. Thread-safe.
public final class PlayoutInputs: Sendable {
    public struct Stream: Sendable, Equatable {
        public var id: UInt32
        public var codec: StreamCodec
        public var sampleRate: Int
        public var channelCount: Int
        public var codecHeader: [UInt8]
    }

    struct State: Sendable {
        var stream: Stream?
        /// None until a stream starts: a schedule counts frames at its stream's rate.
        var schedule: TimelineSchedule?
        var clock: ClockMapping?
        /// The stream's epoch as of the last stream start or flush (for a resume).
        var epoch: UInt32 = 0
        var volume: Float = 1
        var volumeRampNanoseconds: Int64 = 0
        /// The latency the house set for this room (`roomSettings`), replacing the speaker's own.
        var latencyNanoseconds: Int64?
        /// Which of the stream's channels the room plays (`roomSettings`).
        var channelMode: ChannelMode = .stereo
        var endFrame: Int64?
        /// Bumped by every flush the engine must honour (it drops decoded audio past the cut).
        var flushGeneration = 0
        var flushFrame: Int64 = .min
        /// Local times bracketing the arrival of the stream's audio, for the fill rate.
        var firstChunkTime: Int64?
        var firstChunkFrame: Int64 = 0
        var fillRate: Double = 0
    }

    let state = Mutex(State())
    public let chunks = ChunkStore()

    public init() {}

    public func startStream(_ stream: Stream, epoch: UInt32 = 0) {
        chunks.removeAll()
        state.withLock {
            $0.stream = stream
            $0.epoch = epoch
            $0.schedule = TimelineSchedule(sampleRate: stream.sampleRate)
            $0.endFrame = nil
            $0.flushGeneration += 1
            $0.flushFrame = .min
            $0.firstChunkTime = nil
            $0.fillRate = 0
        }
    }

    /// Stores a chunk of the current stream (received at local time `time`) and notes when the
    /// whole stream has arrived.
    public func receive(_ chunk: ChunkStore.Chunk, streamID: UInt32, at time: Int64) {
        let current = state.withLock { s -> Bool in
            guard s.stream?.id == streamID else { return false }
            if s.firstChunkTime == nil {
                s.firstChunkTime = time
                s.firstChunkFrame = chunk.firstFrame
            }
            return true
        }
        guard current else { return }
        chunks.insert(chunk)
        noteFill(at: time)
    }

    private func noteFill(at time: Int64) {
        state.withLock { s in
            guard s.fillRate == 0, let end = s.endFrame, let start = s.firstChunkTime, let stream = s.stream else { return }
            if chunks.contiguousEnd(from: s.firstChunkFrame) >= end && time > start {
                s.fillRate = Double(end - s.firstChunkFrame) / Double(stream.sampleRate) / (Double(time - start) / 1e9)
            }
        }
    }

    public func apply(_ anchor: TimelineAnchor, streamID: UInt32, now serverNow: Int64) {
        state.withLock {
            guard $0.stream?.id == streamID else { return }
            $0.schedule?.apply(anchor, now: serverNow)
        }
    }

    /// Drops audio from `frame` on; from `.min`, everything: the room leaves the stream.
    /// `epoch` is the stream's epoch after the cut.
    public func flush(streamID: UInt32, from frame: Int64, epoch: UInt32 = 0) {
        if frame == .min {
            if state.withLock({ $0.stream?.id == streamID }) { stop() }
            return
        }
        let applies = state.withLock { s -> Bool in
            guard s.stream?.id == streamID else { return false }
            s.flushGeneration += 1
            s.flushFrame = frame
            s.epoch = max(s.epoch, epoch)
            if let end = s.endFrame, end >= frame { s.endFrame = nil }
            return true
        }
        guard applies else { return }
        chunks.flush(from: frame)
    }

    public func end(streamID: UInt32, at frame: Int64, time: Int64) {
        state.withLock { if $0.stream?.id == streamID { $0.endFrame = frame } }
        noteFill(at: time)
    }

    /// What a reconnecting speaker tells the house it holds: nil without a stream.
    public var resume: WireMessage.Resume? {
        let (stream, epoch) = state.withLock { ($0.stream, $0.epoch) }
        guard let stream else { return nil }
        return WireMessage.Resume(streamID: stream.id, epoch: epoch, held: chunks.ranges(maximum: WireMessage.Resume.maximumRanges))
    }

    public func setClock(_ mapping: ClockMapping) { state.withLock { $0.clock = mapping } }

    public func setVolume(_ level: Float, rampNanoseconds: Int64) {
        state.withLock {
            $0.volume = level
            $0.volumeRampNanoseconds = rampNanoseconds
        }
    }

    /// The latency to compensate from now on, as the house set it.
    public func setLatency(_ nanoseconds: Int64) { state.withLock { $0.latencyNanoseconds = nanoseconds } }

    /// Which of the stream's channels to play from now on, as the house set it.
    public func setChannelMode(_ mode: ChannelMode) { state.withLock { $0.channelMode = mode } }

    public var channelMode: ChannelMode { state.withLock { $0.channelMode } }

    /// The latency the house set, if it set one.
    public var latencyNanoseconds: Int64? { state.withLock { $0.latencyNanoseconds } }

    public func stop() {
        chunks.removeAll()
        state.withLock {
            $0.stream = nil
            $0.endFrame = nil
            $0.flushGeneration += 1
        }
    }

    var snapshot: State { state.withLock { $0 } }
}
