/// The last stage of a room's playout: the room volume, moved towards each new target in a
/// straight line over its ramp, sample by sample — no zipper noise, whatever the block size. A
/// new target restarts the ramp from where the gain is. Not thread-safe.
struct VolumeRamp {
    let sampleRate: Int
    private(set) var gain: Float = 1
    private var target: Float = 1
    private var step: Float = 0

    init(sampleRate: Int) { self.sampleRate = sampleRate }

    mutating func apply(target newTarget: Float, rampNanoseconds: Int64, to samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int) {
        if newTarget != target {
            target = newTarget
            let rampFrames = max(1.0, Double(rampNanoseconds) / 1e9 * Double(sampleRate))
            step = Float(Double(target - gain) / rampFrames)
        }
        if gain == target && gain == 1 { return }
        for frame in 0..<frames {
            if gain != target {
                gain += step
                if (step > 0 && gain > target) || (step <= 0 && gain < target) { gain = target }
            }
            for c in 0..<channels { samples[frame * channels + c] *= gain }
        }
    }
}
