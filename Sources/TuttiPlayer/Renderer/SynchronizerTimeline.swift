import TuttiCore

/// One change of a synchronizer's timeline: from device frame `deviceFrame` on, media time
/// `time` (media frame `mediaFrame`) advances at `rate` (0 or 1) frames per device frame.
struct SynchronizerAnchor: Sendable, Equatable {
    var id: Int
    var deviceFrame: Int64
    var time: MediaTime
    /// `time` rounded to the nearest output frame: the media frame played at `deviceFrame`.
    var mediaFrame: Int64
    var rate: Int
    /// False when the anchor continues the previous one seamlessly (a resume where it paused,
    /// a rate set again): observers then carry on instead of restarting.
    var isJump: Bool
}

/// A synchronizer's timeline as a chain of anchors in device-frame order: which media frame
/// plays at which device frame, past, present and scheduled.
///
/// A value: the synchronizer replaces it whole under its lock and hands copies to the feeder
/// and renderers, so none of them ever sees a half-made change.
struct SynchronizerTimeline: Sendable {
    let sampleRate: Int
    /// Ascending `deviceFrame`; the first covers everything before it too.
    private(set) var anchors: [SynchronizerAnchor]
    private var nextID = 1

    init(sampleRate: Int) {
        self.sampleRate = sampleRate
        anchors = [SynchronizerAnchor(id: 0, deviceFrame: .min, time: .zero, mediaFrame: 0, rate: 0, isJump: true)]
    }

    func mediaFrame(of time: MediaTime) -> Int64 {
        time.frame(atSampleRate: sampleRate, rounding: .toNearestOrAwayFromZero)
    }

    /// The anchor in effect at `deviceFrame`.
    func anchor(at deviceFrame: Int64) -> SynchronizerAnchor {
        var low = 0, high = anchors.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if anchors[mid].deviceFrame <= deviceFrame { low = mid } else { high = mid - 1 }
        }
        return anchors[low]
    }

    /// The first anchor after `deviceFrame`, if one is scheduled.
    func nextAnchor(after deviceFrame: Int64) -> SynchronizerAnchor? {
        anchors.first { $0.deviceFrame > deviceFrame }
    }

    /// The media frame that plays at `deviceFrame` (frozen while paused), and whether it plays.
    func media(atDeviceFrame deviceFrame: Int64) -> (frame: Int64, playing: Bool) {
        let anchor = anchor(at: deviceFrame)
        if anchor.rate == 0 { return (anchor.mediaFrame, false) }
        return (anchor.mediaFrame + (deviceFrame - anchor.deviceFrame), true)
    }

    /// The exact media time at device frame `deviceFrame`: the anchor's time plus the elapsed
    /// frames, so no rounding accumulates.
    func time(atDeviceFrame deviceFrame: Int64) -> MediaTime {
        let anchor = anchor(at: deviceFrame)
        if anchor.rate == 0 { return anchor.time }
        return anchor.time + MediaTime(frame: deviceFrame - anchor.deviceFrame, sampleRate: sampleRate)
    }

    /// Appends a change at `deviceFrame`, cancelling any scheduled change at or after it.
    /// A `time` within half a frame of where the timeline stands at `deviceFrame` continues it
    /// exactly (times from `time(atHostTime:)` are nanosecond readings, not frame-aligned), so
    /// a pause and a resume in place neither lose nor repeat a frame. Returns the new anchor.
    mutating func set(rate: Int, time: MediaTime, atDeviceFrame deviceFrame: Int64) -> SynchronizerAnchor {
        anchors.removeAll { $0.deviceFrame >= deviceFrame && $0.deviceFrame != .min }
        let previous = anchor(at: deviceFrame)
        let standing = previous.rate == 0 ? previous.time
                                          : previous.time + MediaTime(frame: deviceFrame - previous.deviceFrame, sampleRate: sampleRate)
        let difference = time - standing
        let continuing = MediaTime(value: 2 * abs(difference.value), timescale: difference.timescale) < MediaTime(frame: 1, sampleRate: sampleRate)
        let start = continuing ? standing : time
        let anchor = SynchronizerAnchor(id: nextID, deviceFrame: deviceFrame, time: start, mediaFrame: mediaFrame(of: start), rate: rate,
                                        isJump: !continuing)
        nextID += 1
        anchors.append(anchor)
        return anchor
    }

    /// Forgets anchors that ended before `deviceFrame` (keeps the one in effect there).
    mutating func forget(before deviceFrame: Int64) {
        var keepFrom = 0
        for (index, anchor) in anchors.enumerated() where anchor.deviceFrame <= deviceFrame { keepFrom = index }
        if keepFrom > 0 { anchors.removeFirst(keepFrom) }
    }

    /// The first device frame, at or after `notBefore`, at which the timeline (as planned now)
    /// plays a media frame of `media`.
    func firstDeviceFrame(playing media: Range<Int64>, notBefore: Int64) -> Int64? {
        var best: Int64?
        for (index, anchor) in anchors.enumerated() where anchor.rate == 1 {
            let segmentEnd = index + 1 < anchors.count ? anchors[index + 1].deviceFrame : Int64.max
            let low = max(anchor.deviceFrame + (media.lowerBound - anchor.mediaFrame), anchor.deviceFrame, notBefore)
            let high = min(anchor.deviceFrame + (media.upperBound - anchor.mediaFrame), segmentEnd)
            if low < high { best = min(best ?? low, low) }
        }
        return best
    }

    /// The earliest media frame the timeline may still play from device frame `deviceFrame` on:
    /// media before it can be forgotten.
    func earliestMediaStillToPlay(fromDeviceFrame deviceFrame: Int64) -> Int64 {
        var earliest = media(atDeviceFrame: deviceFrame).frame
        for anchor in anchors where anchor.deviceFrame > deviceFrame { earliest = min(earliest, anchor.mediaFrame) }
        return earliest
    }
}
