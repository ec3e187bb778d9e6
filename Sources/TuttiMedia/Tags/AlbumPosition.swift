/// Where a track stands on its album: its disc and track numbers, from the `disc` and `track`
/// tags ("3", or "3/12" with the total). The crossfade rule uses it to keep an album's
/// consecutive tracks gapless (a live album, a DJ mix).
public struct AlbumPosition: Sendable, Equatable {
    /// 1 when the file names no disc.
    public var disc: Int
    public var track: Int

    public init(disc: Int = 1, track: Int) {
        self.disc = disc
        self.track = track
    }

    /// nil when `track` holds no positive number; a disc tag that does not parse counts as disc 1.
    public init?(track: String?, disc: String?) {
        guard let track = Self.leadingNumber(track), track > 0 else { return nil }
        self.track = track
        self.disc = Self.leadingNumber(disc).flatMap { $0 > 0 ? $0 : nil } ?? 1
    }

    /// Whether `self` is the track right after `previous` in album order: the next track of
    /// the same disc, or the first track of the next disc.
    public func follows(_ previous: AlbumPosition) -> Bool {
        (disc == previous.disc && track == previous.track + 1) || (disc == previous.disc + 1 && track == 1)
    }

    /// The number a tag starts with ("07/12" is 7), ignoring surrounding spaces.
    private static func leadingNumber(_ tag: String?) -> Int? {
        guard let tag else { return nil }
        let digits = tag.drop { $0 == " " }.prefix { $0.isASCII && $0.isNumber }
        return digits.isEmpty || digits.count > 6 ? nil : Int(digits)
    }
}
