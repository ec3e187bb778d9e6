/// What a device pulls its audio from: the pipeline, clocked by the device.
///
/// Thread-safety: `render` is called only on the device's render thread, one call at a time.
/// It must not allocate, lock, log or block, because that thread may be real-time.
public protocol RenderSource: AnyObject, Sendable {
    /// Writes up to `frameCount` interleaved Float32 frames (the device's channel count) into
    /// `buffer`. `deviceFrame` is the device frame index the first of them will be emitted at.
    func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult

    /// For devices that are not paced by a clock (offline rendering): blocks until more frames
    /// may be available or `timeoutNanoseconds` passes. Never called on a real-time thread.
    func waitForFrames(timeoutNanoseconds: Int64)
}

public struct RenderResult: Sendable, Equatable {
    public var frames: Int
    /// True when the source has delivered its last frame and will never produce more.
    public var endOfStream: Bool

    public init(frames: Int, endOfStream: Bool) {
        self.frames = frames
        self.endOfStream = endOfStream
    }
}

/// Hooks a device calls on its render thread just before entering and just after leaving its
/// render loop. Tests use them to count allocations on that thread; they must not allocate.
@_spi(Testing) public struct RenderLoopObserver: Sendable {
    public var didEnter: @Sendable () -> Void
    public var willExit: @Sendable () -> Void

    public init(didEnter: @escaping @Sendable () -> Void, willExit: @escaping @Sendable () -> Void) {
        self.didEnter = didEnter
        self.willExit = willExit
    }
}
