import Testing
@testable import TuttiCore

@Suite struct MediaTimeTests {
    @Test func sumsAcrossTimescalesAreExact() {
        // One 44.1 kHz frame plus one 48 kHz frame, ten million times, stays exact.
        var t = MediaTime.zero
        let a = MediaTime(frame: 1, sampleRate: 44100)
        let b = MediaTime(frame: 1, sampleRate: 48000)
        for _ in 0..<1_000 { t += a; t += b }
        #expect(t == a * 1_000 + b * 1_000)
        #expect(t.timescale == 7_056_000)
        #expect(t.value == 1_000 * (160 + 147))
    }

    @Test func doublesWouldDriftButMediaTimeDoesNot() {
        var exact = MediaTime.zero
        var approximate = 0.0
        let step = MediaTime(frame: 1, sampleRate: 48000)
        for _ in 0..<48_000 * 60 { exact += step; approximate += 1.0 / 48000 }
        #expect(exact == MediaTime(value: 60, timescale: 1))
        #expect(approximate != 60.0)  // why this type exists
    }

    @Test func comparisonAndEqualityAcrossTimescales() {
        #expect(MediaTime(value: 1, timescale: 2) == MediaTime(value: 24000, timescale: 48000))
        #expect(MediaTime(value: 1, timescale: 44100) < MediaTime(value: 1, timescale: 44099))
        #expect(MediaTime(value: -1, timescale: 3) < .zero)
        var set = Set<MediaTime>()
        set.insert(MediaTime(value: 1, timescale: 2))
        #expect(set.contains(MediaTime(value: 3, timescale: 6)))
    }

    @Test func conversionRounding() {
        let t = MediaTime(value: 1, timescale: 3)
        #expect(t.converted(to: 48000).value == 16000)
        #expect(MediaTime(value: 1, timescale: 44100).converted(to: 48000).value == 1)  // 1.088 → 1
        #expect(MediaTime(value: 1, timescale: 44100).converted(to: 48000, rounding: .up).value == 2)
        #expect(MediaTime(value: -1, timescale: 44100).converted(to: 48000, rounding: .down).value == -2)
        #expect(MediaTime(seconds: 2.5).frame(atSampleRate: 44100) == 110250)
        #expect(MediaTime(value: 3, timescale: 2).nanoseconds == 1_500_000_000)
    }

    @Test func largeValuesDoNotOverflow() {
        // Ten years of 192 kHz frames compared at nanosecond scale needs 128-bit products.
        let frames: Int64 = 192_000 * 86_400 * 3650
        let t = MediaTime(frame: frames, sampleRate: 192_000)
        #expect(t.nanoseconds == 86_400 * 3650 * 1_000_000_000)
        #expect(t < t + MediaTime(value: 1, timescale: 1_000_000_000))
    }

    @Test func wideMathRoundsEveryWay() {
        #expect(WideMath.multiplyDivide(7, 1, 2, rounding: .down) == 3)
        #expect(WideMath.multiplyDivide(7, 1, 2, rounding: .up) == 4)
        #expect(WideMath.multiplyDivide(-7, 1, 2, rounding: .down) == -4)
        #expect(WideMath.multiplyDivide(-7, 1, 2, rounding: .towardZero) == -3)
        #expect(WideMath.multiplyDivide(5, 1, 2, rounding: .toNearestOrEven) == 2)
        #expect(WideMath.multiplyDivide(5, 1, 2, rounding: .toNearestOrAwayFromZero) == 3)
        #expect(WideMath.multiplyDivide(Int64.max / 2, 4, 8) == Int64.max / 4)
    }
}
