import TuttiEngine

/// What the player is doing, in AVPlayer's terms.
public enum TimeControlStatus: String, Sendable {
    case paused
    case waitingToPlayAtSpecifiedRate
    case playing
}

/// Why the player is waiting (AVPlayer.WaitingReason).
public enum WaitingReason: String, Sendable {
    case toMinimizeStalls
    case evaluatingBufferingRate
    case noItemToPlay
}

/// A change the player reports, stamped with the host time (CLOCK_MONOTONIC on the device's
/// clock) at which it is heard.
public enum PlayerEvent: Sendable {
    case status(TimeControlStatus, reason: WaitingReason?, hostTime: Int64)
    /// The current item's buffering changed (likely to keep up, full, empty).
    case buffering(ItemBufferingState, hostTime: Int64)
    /// An item's first frame leaves the device.
    case itemStarted(ItemOutcome, hostTime: Int64)
    /// An item's last frame leaves the device (AVPlayerItemDidPlayToEndTime), or the last frame
    /// before an advance or a removal cut it; `frameCount` says how much of it played.
    case itemEnded(ItemOutcome, hostTime: Int64)
    /// An item could not be played (or only partly); reported when found.
    case itemFailed(ItemOutcome, hostTime: Int64)
    /// Playback ran out of audio and stopped its timeline (the `stalls`-th time) at `hostTime`.
    case stalled(stalls: Int, hostTime: Int64)
    /// A network transfer of item `index` failed and is being retried.
    case retrying(index: Int, attempt: Int, delay: Duration, reason: String, hostTime: Int64)
    /// An internet radio stream of item `index` announced a title.
    case title(index: Int, String, hostTime: Int64)
    /// The queue has played out.
    case ended(hostTime: Int64)
}

/// The current item's buffering, as AVPlayerItem reports it.
public struct ItemBufferingState: Sendable, Equatable {
    /// Playback would likely go on without stalling if it started (or resumed) now.
    public var isPlaybackLikelyToKeepUp: Bool
    /// Nothing more can be buffered ahead now (the forward buffer is full, or everything is here).
    public var isPlaybackBufferFull: Bool
    /// Nothing is buffered ahead: playback has stalled or is about to.
    public var isPlaybackBufferEmpty: Bool
    /// Media buffered ahead of the playhead, in seconds (decoded plus downloaded).
    public var bufferedAheadSeconds: Double
    /// Recent arrival rate of the media in seconds per second of wall time; nil when local
    /// or not measured yet.
    public var arrivalRate: Double?
    /// The item's loaded time ranges, in seconds from its start.
    public var loadedTimeRanges: [ClosedRange<Double>]

    public init(isPlaybackLikelyToKeepUp: Bool = false, isPlaybackBufferFull: Bool = false, isPlaybackBufferEmpty: Bool = true,
                bufferedAheadSeconds: Double = 0, arrivalRate: Double? = nil, loadedTimeRanges: [ClosedRange<Double>] = []) {
        self.isPlaybackLikelyToKeepUp = isPlaybackLikelyToKeepUp
        self.isPlaybackBufferFull = isPlaybackBufferFull
        self.isPlaybackBufferEmpty = isPlaybackBufferEmpty
        self.bufferedAheadSeconds = bufferedAheadSeconds
        self.arrivalRate = arrivalRate
        self.loadedTimeRanges = loadedTimeRanges
    }

    /// The flags only: what an event reports as a change.
    var flags: [Bool] { [isPlaybackLikelyToKeepUp, isPlaybackBufferFull, isPlaybackBufferEmpty] }
}
