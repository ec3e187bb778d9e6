import Synchronization

/// Aborts the network reads of a reader from another thread: a player being stopped cancels
/// the byte source its decode thread may be blocked in, and any source opened afterwards.
///
/// Thread-safety: all members may be called from any thread.
public final class InputCancellation: Sendable {
    private struct State {
        var cancelled = false
        // Weak: a finished item's source (and its cached bytes) must not outlive its decoder.
        var sources: [WeakSource] = []
    }
    private struct WeakSource { weak var source: (any MediaByteSource)? }
    private let state = Mutex(State())

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Tracks `source` so `cancel` reaches it; cancels it at once if already cancelled.
    public func register(_ source: any MediaByteSource) {
        let cancelNow = state.withLock { state -> Bool in
            state.sources.removeAll { $0.source == nil }
            state.sources.append(WeakSource(source: source))
            return state.cancelled
        }
        if cancelNow { source.cancel() }
    }

    public func cancel() {
        let sources = state.withLock { state -> [any MediaByteSource] in
            state.cancelled = true
            defer { state.sources.removeAll() }
            return state.sources.compactMap(\.source)
        }
        for source in sources { source.cancel() }
    }

}
