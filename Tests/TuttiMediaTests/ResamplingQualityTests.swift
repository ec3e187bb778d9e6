import Foundation
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiMedia
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

    /// A 16-bit 44.1 kHz source goes to the rooms at 16 bits (`TrackInfo.wireBits`): resampled
    /// by the house, then rounded again by the chunk encoder. The second rounding adds noise
    /// equal to the source's own, 3 dB more in all: THD+N of a −6 dBFS tone −89 dB, against −92
    /// dB for the source's 16 bits alone and −127 dB for the same tone at 24 bits.
    @Test func sixteenBitsOnTheWireAddTheSourcesOwnQuantizationNoiseOnce() throws {
        let frequency = 997.0, inputRate = 44100
        let source = (0..<(inputRate * 2)).map { n -> Float in
            Float((0.5 * sin(2 * Double.pi * frequency * Double(n) / Double(inputRate)) * 32768).rounded() / 32768)
        }
        let resampler = try Resampler(inputRate: inputRate, outputRate: 48000, channelCount: 1, quality: .high)
        var resampled: [Float] = []
        source.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: $0.count, appendingTo: &resampled) }
        resampler.flush(appendingTo: &resampled)
        let middle = 12000..<84000
        func thdPlusNoise(_ samples: [Float]) -> Double {
            ToneFit(samples[middle].map(Double.init), frequencies: [frequency / 48000]).thdPlusNoiseDecibels
        }
        func throughTheWire(bits: Int) throws -> [Float] {
            let encoder = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 1)
            let decoder = try ChunkDecoder(codec: .flac, sampleRate: 48000, channelCount: 1, codecHeader: encoder.codecHeader)
            var output: [Float] = [], block: [Float] = []
            for start in stride(from: 0, to: resampled.count, by: 4096) {
                let frames = min(4096, resampled.count - start)
                let packet = try resampled.withUnsafeBufferPointer { try encoder.encode($0.baseAddress! + start, frames: frames, significantBits: bits) }
                _ = try decoder.decode(packet, into: &block)
                output += block
            }
            return output
        }
        let sourceAlone = thdPlusNoise(resampled)
        let wire16 = thdPlusNoise(try throughTheWire(bits: 16))
        let wire24 = thdPlusNoise(try throughTheWire(bits: 24))
        print("ResamplingQualityTests 16-bit source: THD+N \(sourceAlone) dB resampled, \(wire16) dB at 16 bits on the wire, \(wire24) dB at 24")
        // Two uncorrelated noises of equal power: 3.01 dB over one.
        #expect(abs(wire16 - sourceAlone - 3.01) < 0.5, "16 bits on the wire: \(wire16) dB, the source alone \(sourceAlone) dB")
        #expect(abs(wire24 - sourceAlone) < 0.1)
        #expect(sourceAlone < -90 && sourceAlone > -94)
    }
}
