/// What a room's playout reports about itself (for status messages and `tutti ctl rooms`).
public struct PlayoutReport: Sendable, Equatable {
    public init() {}
    public var isPlaying = false
    public var streamID: UInt32 = 0
    /// Timeline frame being heard now (approximately: at the last block), or -1.
    public var playheadFrame: Int64 = -1
    public var syncErrorNanoseconds: Int64 = 0
    public var resyncs = 0
    /// Blocks cut short because audio had not arrived.
    public var starvedBlocks = 0
    public var deviceUnderruns = 0
    /// Why audio that arrived cannot be played (a codec the speaker cannot open, a corrupt
    /// chunk), in one line; empty when nothing is wrong.
    public var problem = ""
}
