import Atomics

/// A lock-free single-producer/single-consumer ring of fixed-width slots: interleaved audio
/// frames (`AudioRing`, a slot is one frame of `channelCount` samples) or small records.
///
/// Thread-safety: exactly one thread may call the producer methods (`write`, `writableFrames`)
/// and exactly one other thread the consumer methods (`read`, `readableFrames`, `discard`).
/// Neither side allocates, locks or blocks, so the consumer may be a device's real-time thread.
/// Memory is preallocated at init. Positions are monotonically increasing frame counters;
/// the head and tail live on separate cache lines so the two threads do not false-share.
public final class SPSCRing<Element: BitwiseCopyable>: @unchecked Sendable {
    public let channelCount: Int
    public let capacityFrames: Int

    @usableFromInline let samples: UnsafeMutablePointer<Element>
    @usableFromInline let counters: UnsafeMutablePointer<UnsafeAtomic<Int>.Storage>
    /// Total frames ever written (producer-owned).
    @usableFromInline let writePosition: UnsafeAtomic<Int>
    /// Total frames ever read (consumer-owned).
    @usableFromInline let readPosition: UnsafeAtomic<Int>

    /// Counters are this many `Int`s apart: 128 bytes, two cache lines on common CPUs.
    private static var counterStride: Int { 16 }

    public init(channelCount: Int, capacityFrames: Int, zero: Element) {
        precondition(channelCount > 0 && capacityFrames > 0, "SPSCRing needs a slot width and capacity")
        self.channelCount = channelCount
        self.capacityFrames = capacityFrames
        samples = .allocate(capacity: channelCount * capacityFrames)
        samples.initialize(repeating: zero, count: channelCount * capacityFrames)
        counters = .allocate(capacity: 2 * Self.counterStride)
        counters.initialize(to: UnsafeAtomic<Int>.Storage(0))
        (counters + Self.counterStride).initialize(to: UnsafeAtomic<Int>.Storage(0))
        writePosition = UnsafeAtomic(at: counters)
        readPosition = UnsafeAtomic(at: counters + Self.counterStride)
    }

    deinit {
        samples.deallocate()
        counters.deinitialize(count: 1)
        (counters + Self.counterStride).deinitialize(count: 1)
        counters.deallocate()
    }

    /// Frames the consumer can read now. Consumer side.
    @inlinable
    public var readableFrames: Int {
        writePosition.load(ordering: .acquiring) - readPosition.load(ordering: .relaxed)
    }

    /// Frames the producer can write now. Producer side.
    @inlinable
    public var writableFrames: Int {
        capacityFrames - (writePosition.load(ordering: .relaxed) - readPosition.load(ordering: .acquiring))
    }

    /// Total frames read so far; any thread may read it (as a snapshot).
    public var totalFramesRead: Int { readPosition.load(ordering: .acquiring) }
    /// Total frames written so far; any thread may read it (as a snapshot).
    public var totalFramesWritten: Int { writePosition.load(ordering: .acquiring) }

    /// Copies up to `frames` frames in; returns how many fit. Producer side.
    @inlinable
    @discardableResult
    public func write(_ source: UnsafePointer<Element>, frames: Int) -> Int {
        let written = writePosition.load(ordering: .relaxed)
        let free = capacityFrames - (written - readPosition.load(ordering: .acquiring))
        let count = min(frames, free)
        if count <= 0 { return 0 }
        let start = written % capacityFrames
        let first = min(count, capacityFrames - start)
        (samples + start * channelCount).update(from: source, count: first * channelCount)
        if first < count {
            samples.update(from: source + first * channelCount, count: (count - first) * channelCount)
        }
        writePosition.store(written + count, ordering: .releasing)
        return count
    }

    /// Copies up to `frames` frames out; returns how many were available. Consumer side.
    @inlinable
    public func read(into destination: UnsafeMutablePointer<Element>, frames: Int) -> Int {
        let consumed = readPosition.load(ordering: .relaxed)
        let available = writePosition.load(ordering: .acquiring) - consumed
        let count = min(frames, available)
        if count <= 0 { return 0 }
        let start = consumed % capacityFrames
        let first = min(count, capacityFrames - start)
        destination.update(from: samples + start * channelCount, count: first * channelCount)
        if first < count {
            (destination + first * channelCount).update(from: samples, count: (count - first) * channelCount)
        }
        readPosition.store(consumed + count, ordering: .releasing)
        return count
    }

    /// Forgets frames written at or beyond total position `position`, so the next write lands
    /// there. Producer side, and only while the consumer is known not to read at or beyond
    /// `position` (the caller fences it; see `RingRenderSource.truncate(from:)`).
    public func truncateWrites(to position: Int) {
        let written = writePosition.load(ordering: .relaxed)
        precondition(position >= readPosition.load(ordering: .acquiring), "cannot truncate frames already read")
        if position < written { writePosition.store(position, ordering: .releasing) }
    }

    /// Drops up to `frames` readable frames; returns how many were dropped. Consumer side.
    @inlinable
    @discardableResult
    public func discard(frames: Int) -> Int {
        let consumed = readPosition.load(ordering: .relaxed)
        let count = min(frames, writePosition.load(ordering: .acquiring) - consumed)
        if count <= 0 { return 0 }
        readPosition.store(consumed + count, ordering: .releasing)
        return count
    }
}

/// Interleaved Float32 audio frames; `channelCount` samples per slot.
public typealias AudioRing = SPSCRing<Float>

extension SPSCRing where Element == Float {
    public convenience init(channelCount: Int, capacityFrames: Int) {
        self.init(channelCount: channelCount, capacityFrames: capacityFrames, zero: 0)
    }
}
