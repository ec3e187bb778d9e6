import TuttiMedia

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
    /// An item's first frame leaves the device.
    case itemStarted(QueueItemReport, hostTime: Int64)
    /// An item could not be played (or only partly); reported when found.
    case itemFailed(QueueItemReport, hostTime: Int64)
    /// The device had to play silence: audio was not ready in time.
    case stalled(underruns: Int, hostTime: Int64)
    /// The queue has played out.
    case ended(hostTime: Int64)
}
