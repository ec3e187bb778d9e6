import Foundation
import TuttiEngine
import TuttiMedia
import TuttiProtocol

/// Even loudness (issue 36): each item's gain under the group's `ReplayGainSettings`, from the
/// library's loudness of it (its tags', or measured at the scan). The gain goes to the engine
/// with the item (`GaplessQueueReader.Entry.gain`) and is applied in the house, to the one
/// stream, so every room hears the same; a change of settings is an edit of the queue, cut
/// seamlessly from the edit horizon like any other.
///
/// Thread-safety: on the house's loop, like all of `GroupSession`.
extension GroupSession {
    /// The engine's entry for the item at `path`: its gain (1 with replay gain off), and whether
    /// the engine is to measure it as it plays (its loudness unknown, and measurable).
    func queueEntry(path: String, tag: Int) -> QueueProducer.Entry {
        // Off: nothing read (the library is not asked on the loop at all).
        guard replayGain.mode != .off else { return QueueProducer.Entry(path: path, tag: tag) }
        let known = core.loudness(ofPath: path)
        return QueueProducer.Entry(path: path, tag: tag, gain: Self.gain(for: known, settings: replayGain, random: playModes.random),
                                   measuresLoudness: replayGain.measureAsPlayed && known?.track == nil && Self.isMeasurableAsPlayed(path))
    }

    /// A file, or an http(s) URL of one: the same audio each time it plays. A pipe, standard
    /// input or an HLS stream is not, and a measure of one play says nothing of the next.
    static func isMeasurableAsPlayed(_ path: String) -> Bool {
        guard let location = try? InputLocation(path) else { return false }
        return location.kind == .file || location.kind == .network
    }

    /// The engine measured an item outside the library as it played through: its loudness from
    /// now on (`HouseCore.rememberPlayedLoudness`).
    func measuredAsPlayed(_ outcome: ItemOutcome) {
        guard let loudness = outcome.measuredLoudness else { return }
        core.rememberPlayedLoudness(loudness, ofPath: outcome.path)
    }

    /// ReplayGain's rule (MPD's): the item's, or its album's, loudness to −18 LUFS, plus the
    /// preamp; the missing preamp alone for an item whose loudness is not known; never lifting
    /// its peak over full scale when limited.
    static func gain(for known: (track: Loudness?, album: Loudness?)?, settings: ReplayGainSettings, random: Bool) -> Float {
        let album: Bool
        switch settings.mode {
        case .off: return 1
        case .track: album = false
        case .album: album = true
        case .auto: album = !random
        }
        guard let loudness = album ? (known?.album ?? known?.track) : known?.track else {
            return Float(pow(10, settings.missingPreampDB / 20))
        }
        var gain = pow(10, (loudness.replayGainDB + settings.preampDB) / 20)
        if settings.limit, loudness.peak > 0 { gain = min(gain, 1 / loudness.peak) }
        return Float(gain)
    }

    func setReplayGain(mode: ReplayGainSettings.Mode?, preampDB: Double?, missingPreampDB: Double?, limit: Bool?, measureAsPlayed: Bool?) {
        var settings = replayGain
        if let mode { settings.mode = mode }
        if let preampDB { settings.preampDB = preampDB }
        if let missingPreampDB { settings.missingPreampDB = missingPreampDB }
        if let limit { settings.limit = limit }
        if let measureAsPlayed { settings.measureAsPlayed = measureAsPlayed }
        guard settings != replayGain else { return }
        replayGain = settings
        log("\(self): replay gain \(settings.mode.rawValue), preamp \(settings.preampDB) dB, missing \(settings.missingPreampDB) dB, "
            + (settings.limit ? "peaks limited to full scale" : "peaks not limited")
            + (settings.measureAsPlayed ? ", items outside the library measured as they play" : ""))
        save()
        engineFollowsQueue(soundChanged: true)
    }
}
