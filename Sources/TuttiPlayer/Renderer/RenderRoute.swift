import TuttiCore

/// Where a `SampleBufferRenderer`'s audio goes. The route, not the renderer, decides how much
/// media the renderer asks for and how close to the playhead a flush can still be honoured,
/// because both depend on how much audio is already on its way out: a local sound card holds a
/// few periods, remote rooms hold minutes.
///
/// Thread-safety: routes are immutable values; any thread may read them.
public protocol RenderRoute: Sendable {
    /// How far beyond the playhead the renderer wants media: `isReadyForMoreMediaData` is true
    /// while less than this is enqueued ahead of the playhead.
    var forwardBufferDuration: MediaTime { get }
    /// The minimum distance from the playhead at which `flush(fromSourceTime:completion:)` can
    /// still be honoured: media closer than this has already left for the output.
    var flushLeadTime: MediaTime { get }
    /// How much media the renderer commits to its real-time ring ahead of what the device has
    /// pulled. Everything beyond stays in ordinary memory, where a flush can still remove it.
    var realTimeLead: MediaTime { get }
}

extension RenderRoute {
    /// A fifth of a second: enough to ride out a busy feeder thread, small enough that a flush
    /// a quarter of a second ahead of the playhead is still possible.
    public var realTimeLead: MediaTime { MediaTime(value: 1, timescale: 5) }
}
