import Foundation
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiSimulation

/// The resampling paths hold the quality docs/RESAMPLING.md gives them, measured on tones
/// through the product's own resamplers; and the tone fit that reads them reads a known signal
/// right.
@Suite struct ResamplingQualityTests {
    /// A tone, a second tone 80 dB under it and white noise: the fit gives each amplitude, and
    /// the residual of the fundamental alone is the other two, to a hundredth of a dB.
    @Test func theToneFitReadsAKnownSignal() {
        var random = SplitMix64(seed: 7)
        let noiseRMS = 1e-4
        let second = 0.5e-4
        var signal: [Double] = []
        for n in 0..<96000 {
            let t = Double(n)
            let tone: Double = 0.5 * sin(2 * Double.pi * 0.0208333 * t + 0.3)
            let other: Double = second * sin(2 * Double.pi * 0.1 * t)
            let uniform: Double = random.nextUnitInterval() - 0.5  // RMS 1/√12
            signal.append(tone + other + 0.01 + noiseRMS * uniform * 12.0.squareRoot())
        }
        let both = ToneFit(signal, frequencies: [0.0208333, 0.1])
        #expect(abs(both.amplitudes[0] - 0.5) < 1e-5)
        #expect(abs(both.amplitudes[1] - second) < 2e-6)
        let alone = ToneFit(signal, frequencies: [0.0208333])
        let expected = ToneFit.decibels((second * second / 2 + noiseRMS * noiseRMS).squareRoot() / (0.5 / 2.0.squareRoot()))
        #expect(abs(alone.thdPlusNoiseDecibels - expected) < 0.05, "THD+N \(alone.thdPlusNoiseDecibels) dB, expected \(expected) dB")
        #expect(ToneFit.folded(0.55) == 0.44999999999999996 && ToneFit.folded(1.2) < 0.2000001)
    }

    /// The house's libsoxr HQ: flat to 0.01 dB up to 20 kHz, THD+N under −125 dB, images
    /// 130 dB down (a lower recipe, 16-bit, would be near −96 dB).
    @Test func theHouseConvertsAtLibsoxrsHighQuality() throws {
        let report = try ResamplingQuality.measure(.house)
        #expect(report.passbandRippleDecibels < 0.01, "ripple \(report.passbandRippleDecibels) dB")
        #expect(report.worstTHDPlusNoiseDecibels < -125, "THD+N \(report.worstTHDPlusNoiseDecibels) dB")
        #expect(report.stopbandRejectionDecibels > 130, "stopband \(report.stopbandRejectionDecibels) dB")
    }

    /// The room's drift resampler at 100 ppm: flat to 0.01 dB, THD+N under −95 dB to 19 kHz and
    /// under −60 dB at 20 kHz (its documented worst), images 60 dB down; and the whole path of a
    /// 44.1 kHz source the same below 20 kHz. The one-stage alternative is far worse near 20 kHz,
    /// which is why the house converts the rate (docs/RESAMPLING.md).
    @Test func theRoomsDriftStageAndTheWholePathHoldTheirFigures() throws {
        let room = try ResamplingQuality.measure(.room)
        #expect(room.passbandRippleDecibels < 0.01)
        #expect(room.tones.filter { $0.frequencyHz <= 19000 }.allSatisfy { $0.thdPlusNoiseDecibels < -95 }, "\(room.tones)")
        #expect(room.worstTHDPlusNoiseDecibels < -60 && room.stopbandRejectionDecibels > 60)

        let path = try ResamplingQuality.measure(.houseThenRoom)
        #expect(path.passbandRippleDecibels < 0.02)
        #expect(path.tones.filter { $0.frequencyHz <= 19000 }.allSatisfy { $0.thdPlusNoiseDecibels < -95 }, "\(path.tones)")
        #expect(path.worstTHDPlusNoiseDecibels < -60)

        let oneStage = try ResamplingQuality.measure(.roomOnly)
        #expect(oneStage.worstTHDPlusNoiseDecibels > -40 && oneStage.stopbandRejectionDecibels < 20)
    }
}
