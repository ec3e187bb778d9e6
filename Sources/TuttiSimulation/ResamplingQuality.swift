#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TuttiCore
import TuttiDiagnostics
import TuttiMedia

/// The quality of each resampling path a frame can take to a room, measured on sine tones
/// (docs/RESAMPLING.md): the gain at each frequency (passband ripple), THD+N (everything but
/// the tone, full band), and the level of the tone's image (stopband rejection). Used by
/// `tutti-bench resampling` and by the tests that hold the paths to their figures.
///
/// Every path runs mono Float32 through the product's own resamplers, exactly as they are
/// configured in the house and the speaker; the tone's output frequency is known exactly from
/// the rates and the step, so `ToneFit` reads the output without windows or FFTs.
public enum ResamplingPath: String, CaseIterable, Sendable, Codable {
    /// What the house does to a 44.1 kHz item: libsoxr's HQ recipe to 48 kHz (`Resampler`).
    case house
    /// What a speaker does to the 48 kHz timeline: the drift resampler (`VariableRateResampler`,
    /// 32 taps) at a step `1 + drift`.
    case room
    /// The two in turn: what a room emits of a 44.1 kHz source today.
    case houseThenRoom = "house+room"
    /// The alternative: the speaker's drift resampler converting 44.1 kHz to 48 kHz and drift in
    /// one pass (`step = 44100/48000 × (1 + drift)`), with no house stage.
    case roomOnly = "room only"

    public var inputRate: Int { self == .room ? 48000 : 44100 }

    public var summary: String {
        switch self {
        case .house: "house: libsoxr HQ, 44.1 → 48 kHz"
        case .room: "room: drift resampler, 48 kHz at 1 + drift"
        case .houseThenRoom: "house + room (today's path for 44.1 kHz)"
        case .roomOnly: "room only: drift resampler 44.1 → 48 kHz and drift"
        }
    }
}

public struct ToneMeasurement: Sendable, Codable {
    public var frequencyHz: Double
    /// Output amplitude over input amplitude.
    public var gainDecibels: Double
    /// Everything that is not the tone (harmonics, images, aliases, noise, 0–24 kHz), relative
    /// to the tone's input level (in the passband, where the gain is 0 dB, that is THD+N).
    public var thdPlusNoiseDecibels: Double
    /// The strongest image of the tone that the conversion can make, relative to the tone's
    /// input level: what the stopband let through. (Relative to the input, not to the output
    /// tone: a tone in the transition band is attenuated on purpose, and so is its image.)
    public var imageDecibels: Double
}

public struct ResamplingQualityReport: Sendable, Codable {
    public var path: ResamplingPath
    public var driftPartsPerMillion: Double
    public var tones: [ToneMeasurement]
    /// Highest minus lowest gain over the passband tones (≤ 20 kHz), in dB.
    public var passbandRippleDecibels: Double
    /// The worst THD+N over the passband tones.
    public var worstTHDPlusNoiseDecibels: Double
    /// The worst THD+N over the tones up to 10 kHz (most of music's energy).
    public var worstTHDPlusNoiseTo10kHzDecibels: Double
    /// The weakest rejection of any tone's image, tones up to the input's Nyquist frequency
    /// (positive dB: how far below the tone).
    public var stopbandRejectionDecibels: Double
}

public enum ResamplingQuality {
    /// The passband tones, in Hz: a stepped sweep from 20 Hz to 20 kHz.
    public static let passbandTones: [Double] = [20, 100, 1000, 3000, 6000, 10000, 14000, 17000, 19000, 20000]
    /// Tones between 20 kHz and the 44.1 kHz input's Nyquist frequency, for their images only
    /// (a resampler may attenuate the tones themselves: that is its transition band).
    public static let transitionTones: [Double] = [21000, 21500, 22000]
    /// Test tone level: −6 dBFS, clear of any overshoot.
    public static let amplitude = 0.5
    public static let outputRate = 48000
    /// The room's image lies `drift` cycles a sample from its tone: 4.8 cycles over the 2 s read
    /// at this, enough for the fit to tell them apart.
    public static let minimumDriftPartsPerMillion = 50.0

    /// Measures `path` on every tone, at `driftPartsPerMillion` (the room's step above 1).
    public static func measure(_ path: ResamplingPath, driftPartsPerMillion: Double = 100) throws -> ResamplingQualityReport {
        let tones = passbandTones + (path.inputRate == 44100 ? transitionTones : [])
        var measured: [ToneMeasurement] = []
        for tone in tones {
            measured.append(try measure(path, toneHz: tone, driftPartsPerMillion: driftPartsPerMillion))
        }
        let passband = measured.filter { $0.frequencyHz <= 20000 }
        let gains = passband.map(\.gainDecibels)
        return ResamplingQualityReport(
            path: path, driftPartsPerMillion: driftPartsPerMillion, tones: measured,
            passbandRippleDecibels: gains.max()! - gains.min()!,
            worstTHDPlusNoiseDecibels: passband.map(\.thdPlusNoiseDecibels).max()!,
            worstTHDPlusNoiseTo10kHzDecibels: passband.filter { $0.frequencyHz <= 10000 }.map(\.thdPlusNoiseDecibels).max()!,
            stopbandRejectionDecibels: -measured.map(\.imageDecibels).max()!)
    }

    /// One tone through `path`: 2.5 s in, the middle 2 s of the output read.
    public static func measure(_ path: ResamplingPath, toneHz: Double, driftPartsPerMillion: Double = 100) throws -> ToneMeasurement {
        precondition(abs(driftPartsPerMillion) >= minimumDriftPartsPerMillion && abs(driftPartsPerMillion) <= 500,
                     "drift \(driftPartsPerMillion) ppm: the fit needs ±\(minimumDriftPartsPerMillion)–500")
        let inputRate = Double(path.inputRate)
        let input = (0..<(path.inputRate * 5 / 2)).map { n -> Float in
            let cycles = Double(n) * toneHz / inputRate
            return Float(amplitude * sin(2 * Double.pi * (cycles - cycles.rounded(.down))))
        }
        let step = 1 + driftPartsPerMillion * 1e-6
        let out = Double(outputRate)
        // Frequencies in cycles per output sample; images from the rate each stage reads.
        let output: [Float]
        let fundamental: Double
        var images: [Double] = []
        switch path {
        case .house:
            output = try soxr(input)
            fundamental = toneHz / out
            images = [(44100 - toneHz) / out]
        case .room:
            output = drift(input, step: step)
            fundamental = toneHz / out * step
            images = [(1 - toneHz / out) * step]
        case .houseThenRoom:
            output = drift(try soxr(input), step: step)
            fundamental = toneHz / out * step
            images = [(44100 - toneHz) / out * step, (1 - toneHz / out) * step]
        case .roomOnly:
            let total = inputRate / out * step
            output = drift(input, step: total)
            fundamental = toneHz / inputRate * total
            images = [(1 - toneHz / inputRate) * total]
        }
        let window = Array(output[(outputRate / 4)..<(outputRate / 4 + 2 * outputRate)]).map(Double.init)
        let alone = ToneFit(window, frequencies: [fundamental])
        let withImages = ToneFit(window, frequencies: [fundamental] + images.map(ToneFit.folded))
        let image = withImages.amplitudes.dropFirst().max()!
        return ToneMeasurement(frequencyHz: toneHz, gainDecibels: ToneFit.decibels(alone.amplitudes[0] / amplitude),
                               thdPlusNoiseDecibels: ToneFit.decibels(alone.residualRMS / (amplitude / 2.0.squareRoot())),
                               imageDecibels: ToneFit.decibels(image / amplitude))
    }

    /// The house's stage: `Resampler` with the HQ recipe, as the engine makes it.
    public static func soxr(_ input: [Float]) throws -> [Float] {
        let resampler = try Resampler(inputRate: 44100, outputRate: outputRate, channelCount: 1, quality: .high)
        var output: [Float] = []
        input.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: $0.count, appendingTo: &output) }
        resampler.flush(appendingTo: &output)
        return output
    }

    /// The speaker's stage: `VariableRateResampler` as `Playout` makes it (its default filter), at
    /// a constant `step`, its output starting at input frame 0.
    public static func drift(_ input: [Float], step: Double) -> [Float] {
        let resampler = VariableRateResampler(channelCount: 1, inputCapacityFrames: input.count)
        let appended = input.withUnsafeBufferPointer { resampler.appendInput($0.baseAddress!, frames: $0.count) }
        precondition(appended == input.count, "the drift resampler took \(appended) of \(input.count) frames")
        var output = [Float](repeating: 0, count: Int(Double(input.count) / step))
        let produced = output.withUnsafeMutableBufferPointer { resampler.render(into: $0.baseAddress!, frames: $0.count, step: step) }
        output.removeLast(output.count - produced)
        return output
    }
}
