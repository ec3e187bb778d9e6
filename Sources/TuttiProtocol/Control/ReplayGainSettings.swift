/// How a group evens out its items' loudness (MPD's `replay_gain_mode`, and mpd.conf's
/// `replaygain_preamp`, `replaygain_missing_preamp` and `replaygain_limit`): each item is
/// brought to ReplayGain's reference loudness (−18 LUFS) from its own (`track`), or its album's,
/// which keeps the album's tracks' levels relative to one another (`album`; `auto` is `album`
/// unless the queue plays in random order). The gain is applied in the house, to the one
/// stream, so every room hears the same.
public struct ReplayGainSettings: Codable, Sendable, Equatable {
    public enum Mode: String, Codable, Sendable, CaseIterable {
        case off, track, album, auto
    }

    public var mode: Mode
    /// Added to the gain of an item whose loudness is known (tagged or measured), in dB.
    public var preampDB: Double
    /// The gain of an item whose loudness is not known (a URL, a pipe, a file outside the
    /// library), in dB.
    public var missingPreampDB: Double
    /// Peak protection: no gain lifts an item's peak over full scale.
    public var limit: Bool
    /// An item outside the library (a file elsewhere, an http(s) URL of a file) is measured the
    /// first time it plays to its end, and that loudness is its gain's from its next play on;
    /// off: such items play at the missing preamp's gain, always. Pipes, standard input and
    /// HLS, whose content is not the same twice, never are.
    public var measureAsPlayed: Bool

    public init(mode: Mode = .off, preampDB: Double = 0, missingPreampDB: Double = 0, limit: Bool = true, measureAsPlayed: Bool = true) {
        self.mode = mode
        self.preampDB = preampDB
        self.missingPreampDB = missingPreampDB
        self.limit = limit
        self.measureAsPlayed = measureAsPlayed
    }

    private enum CodingKeys: String, CodingKey {
        case mode, preampDB, missingPreampDB, limit, measureAsPlayed
    }

    /// Settings stored before `measureAsPlayed` existed read it as on, its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        mode = try container.decode(Mode.self, forKey: .mode)
        preampDB = try container.decode(Double.self, forKey: .preampDB)
        missingPreampDB = try container.decode(Double.self, forKey: .missingPreampDB)
        limit = try container.decode(Bool.self, forKey: .limit)
        measureAsPlayed = try container.decodeIfPresent(Bool.self, forKey: .measureAsPlayed) ?? true
    }

    /// The preamps a controller may set, in dB (MPD's range).
    public static let preampRange = -15.0...15.0
}
