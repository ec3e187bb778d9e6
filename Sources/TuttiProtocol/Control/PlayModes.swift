/// How the queue plays on past the item heard: MPD's options, which every MPD client shows.
/// - `repeat`: the queue starts again after its last item (with `single`, the item heard does).
/// - `random`: items play in a shuffled order, kept until the queue or the mode changes.
/// - `single`: playing stops after the item heard.
/// - `consume`: an item leaves the queue once it has been heard.
///
/// The house stores them with its queue; a change cuts the stream only where what is heard
/// next changes, never what is heard now.
public struct PlayModes: Codable, Sendable, Equatable {
    public var `repeat`: Bool
    public var random: Bool
    public var single: Bool
    public var consume: Bool

    public init(repeat: Bool = false, random: Bool = false, single: Bool = false, consume: Bool = false) {
        self.repeat = `repeat`
        self.random = random
        self.single = single
        self.consume = consume
    }
}
