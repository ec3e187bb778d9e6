import TuttiCore
/// One point of a stream's timeline: `timelineFrame` is heard at `serverTime`, and from there
/// the timeline advances in real time (playing) or stands still (paused).
public struct TimelineAnchor: Sendable, Equatable {
    public var timelineFrame: Int64
    public var serverTime: Int64
    public var isPlaying: Bool

    public init(timelineFrame: Int64, serverTime: Int64, isPlaying: Bool) {
        self.timelineFrame = timelineFrame
        self.serverTime = serverTime
        self.isPlaying = isPlaying
    }
}

/// The anchors of a stream, in server-time order: the server schedules each change (play,
/// pause, resume, seek) slightly ahead, and every room applies it at the same server instant.
public struct TimelineSchedule: Sendable, Equatable {
    public let sampleRate: Int
    public private(set) var anchors: [TimelineAnchor] = []

    public init(sampleRate: Int) { self.sampleRate = sampleRate }

    /// Adds an anchor. One at the same server time replaces it, and later ones are dropped;
    /// anchors in the past beyond the latest one that has taken effect by `now` are dropped.
    /// An anchor already held changes nothing.
    public mutating func apply(_ anchor: TimelineAnchor, now: Int64) {
        // Sent again (to a room that reconnects): nothing changes, and later anchors stay.
        if anchors.contains(anchor) { return }
        anchors.removeAll { $0.serverTime >= anchor.serverTime }
        anchors.append(anchor)
        if let current = anchors.lastIndex(where: { $0.serverTime <= now }), current > 0 {
            anchors.removeFirst(current)
        }
    }

    public mutating func removeAll() { anchors.removeAll() }

    /// The anchor in force at server time `time`, if any.
    public func anchor(atServer time: Int64) -> TimelineAnchor? {
        anchors.last { $0.serverTime <= time }
    }

    /// The first anchor change strictly after `time`.
    public func nextChange(after time: Int64) -> Int64? {
        anchors.first { $0.serverTime > time }?.serverTime
    }

    /// The timeline position heard at server time `time`: nil before the first anchor or while
    /// paused (when nothing is heard).
    public func position(atServer time: Int64) -> FramePosition? {
        guard let anchor = anchor(atServer: time), anchor.isPlaying else { return nil }
        // (time − T0) × rate / 1e9 in 128 bits: exact integer frames and a fraction.
        let scaled = Int128(time - anchor.serverTime) * Int128(sampleRate)
        let frames = scaled / 1_000_000_000
        let remainder = scaled - frames * 1_000_000_000
        return FramePosition(frame: anchor.timelineFrame + Int64(frames), fraction: Double(remainder) / 1e9)
    }
}
