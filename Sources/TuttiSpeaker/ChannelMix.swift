import TuttiProtocol

/// The stage of a room's playout before its volume: which of the stream's two channels its card
/// plays (`ChannelMode`). A change of mode crosses over in a straight line within
/// `crossoverFrames`, so pairing two rooms while they play does not click; the first block is
/// in the room's mode from its first frame (a half of a pair whose first sound was music, a
/// late start, carried 10 ms of the other channel). Allocates nothing. Not thread-safe.
struct ChannelMix {
    private(set) var mode: ChannelMode = .stereo
    private var previous: ChannelMode = .stereo
    private var crossoverLeft = 0
    /// Whether a block went through: until then there is no mode to cross over from.
    private var started = false
    let crossoverFrames: Int

    /// - Parameter crossoverFrames: how long a change of mode takes (10 ms is inaudible as a
    ///   change and too short to hear as a fade).
    init(crossoverFrames: Int) { self.crossoverFrames = max(1, crossoverFrames) }

    /// Mixes `frames` interleaved frames of `channels` in place: the first two channels are the
    /// stream's left and right; any further ones are left as they are.
    mutating func apply(_ target: ChannelMode, to samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int) {
        if !started {
            started = true
            mode = target
            previous = target
        } else if target != mode {
            // A change that comes during a crossover starts a new one from the mode it was
            // heading to: the blend left behind steps once, by what remained of a 10 ms fade.
            previous = mode
            mode = target
            crossoverLeft = crossoverFrames
        }
        guard channels >= 2, mode != .stereo || crossoverLeft > 0 else { return }
        for frame in 0..<frames {
            let base = frame * channels
            let left = samples[base], right = samples[base + 1]
            var (a, b) = mode.mix(left: left, right: right)
            if crossoverLeft > 0 {
                let weight = Float(crossoverLeft) / Float(crossoverFrames)
                let (pa, pb) = previous.mix(left: left, right: right)
                a += (pa - a) * weight
                b += (pb - b) * weight
                crossoverLeft -= 1
            }
            samples[base] = a
            samples[base + 1] = b
        }
    }
}
