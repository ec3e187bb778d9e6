import Testing
import TuttiProtocol
@testable import TuttiSpeaker

/// A room's channel mode, sample by sample: each mode's channels exactly, further channels
/// untouched, and a change of mode crossing over in a straight line without a jump.
@Suite struct ChannelMixTests {
    /// Three frames of three channels: left, right, and a third the mix leaves alone.
    static let frames: [Float] = [0.5, -0.25, 0.9, 1, 1, 0.8, -1, 0.75, 0.7]

    func mixed(_ mode: ChannelMode) -> [Float] {
        var mix = ChannelMix(crossoverFrames: 1)
        var samples = Self.frames
        // Settled: the first call's single frame of crossover is spent on a block before.
        var warm = Self.frames
        warm.withUnsafeMutableBufferPointer { mix.apply(mode, to: $0.baseAddress!, frames: 3, channels: 3) }
        samples.withUnsafeMutableBufferPointer { mix.apply(mode, to: $0.baseAddress!, frames: 3, channels: 3) }
        return samples
    }

    @Test func eachModePlaysItsChannels() {
        #expect(mixed(.stereo) == Self.frames)
        #expect(mixed(.left) == [0.5, 0.5, 0.9, 1, 1, 0.8, -1, -1, 0.7])
        #expect(mixed(.right) == [-0.25, -0.25, 0.9, 1, 1, 0.8, 0.75, 0.75, 0.7])
        // Their mean, at half of each: two full-scale channels in phase stay at full scale.
        #expect(mixed(.mono) == [0.125, 0.125, 0.9, 1, 1, 0.8, -0.125, -0.125, 0.7])
    }

    @Test func aChangeOfModeCrossesOverInAStraightLine() {
        var mix = ChannelMix(crossoverFrames: 100)
        var first: [Float] = [1, 0]
        first.withUnsafeMutableBufferPointer { mix.apply(.stereo, to: $0.baseAddress!, frames: 1, channels: 2) }
        // Left 1, right 0 throughout: from stereo to right, the left output falls from 1 to 0.
        var samples = [Float](repeating: 0, count: 400)
        for frame in 0..<200 { samples[frame * 2] = 1 }
        samples.withUnsafeMutableBufferPointer { mix.apply(.right, to: $0.baseAddress!, frames: 200, channels: 2) }
        let left = (0..<200).map { samples[$0 * 2] }
        #expect(left[0] == 1 && left[100...].allSatisfy { $0 == 0 }, "\(left)")
        for frame in 1..<100 { #expect(abs(left[frame - 1] - left[frame] - 0.01) < 1e-5, "frame \(frame): \(left[frame - 1]) → \(left[frame])") }
        #expect((0..<200).allSatisfy { samples[$0 * 2 + 1] == 0 })
    }

    /// The first block is in the room's mode from its first frame: a half of a stereo pair
    /// whose card first sounds mid-song (a late start) plays its channel alone from there.
    @Test func theFirstBlockIsInTheModeFromItsFirstFrame() {
        var mix = ChannelMix(crossoverFrames: 480)
        var samples = [Float](repeating: 0, count: 960)
        for frame in 0..<480 { samples[frame * 2] = 0.5; samples[frame * 2 + 1] = -0.25 }
        samples.withUnsafeMutableBufferPointer { mix.apply(.right, to: $0.baseAddress!, frames: 480, channels: 2) }
        #expect(samples.allSatisfy { $0 == -0.25 }, "\(samples.prefix(8))")
    }
}
