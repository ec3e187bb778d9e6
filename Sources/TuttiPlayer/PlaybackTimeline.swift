/// The player's timebase as heard: which media frame (of the queue's timeline) each device
/// frame emits, built from the render source's `Transition` log. Between transitions the
/// media timeline either runs with the device (playing) or stands still (paused, stalled).
///
/// Not thread-safe: owned by the player's supervisor thread.
struct PlaybackTimeline {
    /// Transitions in device order; playback starts playing at device frame 0, media frame 0.
    private(set) var transitions: [Transition] = [Transition(deviceFrame: 0, mediaFrame: 0, kind: .playing)]

    mutating func append(_ transition: Transition) {
        transitions.append(transition)
        // Old history is not needed once far behind; keep a bounded log.
        if transitions.count > 4096 { transitions.removeFirst(2048) }
    }

    /// The media frame heard at device frame `deviceFrame`.
    func mediaFrame(atDeviceFrame deviceFrame: Int64) -> Int64 {
        guard let last = transitions.last(where: { $0.deviceFrame <= deviceFrame }) else { return 0 }
        return last.kind == .playing ? last.mediaFrame + (deviceFrame - last.deviceFrame) : last.mediaFrame
    }

    /// The device frame at which media frame `mediaFrame` is heard, if playback has got there
    /// (or is running towards it now).
    func deviceFrame(forMediaFrame mediaFrame: Int64) -> Int64? {
        for (index, transition) in transitions.enumerated() where transition.kind == .playing && transition.mediaFrame <= mediaFrame {
            let candidate = transition.deviceFrame + (mediaFrame - transition.mediaFrame)
            let next = index + 1 < transitions.count ? transitions[index + 1] : nil
            if next.map({ candidate < $0.deviceFrame }) ?? true { return candidate }
        }
        return nil
    }

    /// Whether the media timeline runs at device frame `deviceFrame`.
    func isRunning(atDeviceFrame deviceFrame: Int64) -> Bool {
        transitions.last(where: { $0.deviceFrame <= deviceFrame })?.kind == .playing
    }
}
