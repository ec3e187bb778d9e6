import TuttiCore
import TuttiProtocol

/// Crossfade (issue 36): the group's setting, in seconds, given to its engine, which overlaps
/// consecutive items on one stream (`Crossfade`, `GaplessQueueReader`), so every room of the
/// group fades identically. A change is an edit: what is decoded from the edit horizon on is
/// decoded again with it, and the item heard goes on from the same frame.
///
/// Thread-safety: on the house's loop, like all of `GroupSession`.
extension GroupSession {
    /// The crossfade as the engine takes it: whole microseconds, so a setting read back from
    /// the store is the same time.
    var crossfade: MediaTime {
        MediaTime(value: Int64((crossfadeSeconds * 1_000_000).rounded()), timescale: 1_000_000)
    }

    func setCrossfade(seconds: Double) {
        loop.preconditionInEventLoop()
        guard seconds != crossfadeSeconds else { return }
        crossfadeSeconds = seconds
        log(seconds == 0 ? "\(self): crossfade off, items join gapless"
            : "\(self): crossfade \(seconds) s between items, an album's next track gapless")
        save()
        guard let engine = stream?.engine else { return }
        engine.setCrossfade(crossfade)
        productionMayProceed()
    }
}
