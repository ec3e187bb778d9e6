import ArgumentParser
import TuttiCore
import TuttiMedia
import TuttiSimulation

/// `tutti-bench resampling`: the quality and the cost of each resampling path a frame can take
/// to a room (docs/RESAMPLING.md). Quality is measured on sine tones through the product's own
/// resamplers (`ResamplingQuality`); cost is each stage's time per output frame, stereo, on
/// this machine.
struct ResamplingBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resampling",
        abstract: "Quality (passband ripple, THD+N, stopband) and cost of the house's and the rooms' resampling.",
        discussion: """
            Paths: the house's libsoxr HQ (44.1 → 48 kHz), the room's drift resampler (48 kHz at \
            1 + drift), the two in turn (what a room emits of a 44.1 kHz source), and the \
            alternative of one stage in the room (44.1 → 48 kHz and drift together).

            Each tone (−6 dBFS, 20 Hz to 22 kHz) runs 2.5 s through the path; the middle 2 s of \
            the output are fitted with the tone at its exact output frequency. gain: output over \
            input level. THD+N: all that is not the tone, 0–24 kHz, relative to the tone's input \
            level. image: the tone's image (the stopband's work), relative to the same. Ripple and THD+N are over 20 Hz \
            to 20 kHz; stopband rejection is the weakest image over every tone.

            Cost: ns per stereo output frame of each stage alone, best of --runs over 60 s of noise.
            """)

    @Option(help: "The room's clock drift the drift resampler corrects, in ppm.")
    var driftPpm = 100.0

    @Option(help: "Runs of each cost measurement; the best is reported.")
    var runs = 3

    @Flag(help: "Every tone of every path, not only the summary.")
    var tones = false

    @Flag(help: "Print the results as JSON.")
    var json = false

    func validate() throws {
        guard abs(driftPpm) <= 500 && abs(driftPpm) >= ResamplingQuality.minimumDriftPartsPerMillion else {
            throw ValidationError("--drift-ppm must be within ±\(Int(ResamplingQuality.minimumDriftPartsPerMillion))–500 (the room's image is that far from its tone: nearer, the fit cannot tell them apart), got \(driftPpm)")
        }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
    }

    func run() throws {
        var reports: [ResamplingQualityReport] = []
        for path in ResamplingPath.allCases {
            Console.progress("measuring \(path.summary)…")
            reports.append(try ResamplingQuality.measure(path, driftPartsPerMillion: driftPpm))
        }
        Console.progress("measuring cost…")
        let cost = try measureCost()
        let report = ResamplingBenchReport(driftPartsPerMillion: driftPpm, paths: reports, cost: cost)
        if json {
            Console.output(try Format.json(report))
            return
        }
        var text = "Resampling quality, tones at −6 dBFS, room drift \(Format.fixed(driftPpm, 0)) ppm:\n\n"
        text += Format.table(
            header: ["path", "ripple 20 Hz–20 kHz", "THD+N ≤ 10 kHz", "THD+N ≤ 20 kHz", "stopband rejection"],
            rows: reports.map { r in
                [r.path.summary, Format.fixed(r.passbandRippleDecibels, 4) + " dB", Format.fixed(r.worstTHDPlusNoiseTo10kHzDecibels, 1) + " dB",
                 Format.fixed(r.worstTHDPlusNoiseDecibels, 1) + " dB", Format.fixed(r.stopbandRejectionDecibels, 1) + " dB"]
            })
        if tones {
            for r in reports {
                text += "\n" + r.path.summary + ":\n"
                text += Format.table(header: ["tone", "gain", "THD+N", "image"], rows: r.tones.map { t in
                    [Format.fixed(t.frequencyHz, 0) + " Hz", Format.fixed(t.gainDecibels, 4) + " dB", Format.fixed(t.thdPlusNoiseDecibels, 1) + " dB",
                     Format.fixed(t.imageDecibels, 1) + " dB"]
                })
            }
        }
        text += "\nCost per stereo output frame (one thread, best of \(runs)):\n"
        text += Format.table(header: ["stage", "ns/frame", "× real time"], rows: cost.map { c in
            [c.stage, Format.fixed(c.nanosecondsPerFrame, 1), Format.fixed(1e9 / c.nanosecondsPerFrame / 48000, 0)]
        })
        Console.output(text)
    }

    private func measureCost() throws -> [ResamplingCost] {
        let seconds = 60
        var generator = SplitMix64(seed: 1)
        let noise44 = (0..<(44100 * seconds * 2)).map { _ in Float(generator.nextUnitInterval() - 0.5) }
        let noise48 = (0..<(48000 * seconds * 2)).map { _ in Float(generator.nextUnitInterval() - 0.5) }
        let step = 1 + driftPpm * 1e-6
        var house = Double.infinity
        var room = Double.infinity
        var roomOnly = Double.infinity
        for _ in 0..<runs {
            house = min(house, try Self.timeSoxr(noise44))
            room = min(room, Self.timeDrift(noise48, step: step))
            roomOnly = min(roomOnly, Self.timeDrift(noise44, step: 44100.0 / 48000 * step))
        }
        return [ResamplingCost(stage: "house: libsoxr HQ 44.1 → 48 kHz", nanosecondsPerFrame: house),
                ResamplingCost(stage: "room: drift resampler, 32 taps", nanosecondsPerFrame: room),
                ResamplingCost(stage: "room only: drift resampler 44.1 → 48 kHz", nanosecondsPerFrame: roomOnly)]
    }

    /// ns per output frame, processing in 4096-frame blocks as the engine does.
    private static func timeSoxr(_ input: [Float]) throws -> Double {
        let resampler = try Resampler(inputRate: 44100, outputRate: 48000, channelCount: 2, quality: .high)
        var output: [Float] = []
        output.reserveCapacity(input.count * 48000 / 44100 + 65536)
        var produced = 0
        let start = Stopwatch.now()
        input.withUnsafeBufferPointer { all in
            var frame = 0
            let frames = all.count / 2
            while frame < frames {
                let count = min(4096, frames - frame)
                output.removeAll(keepingCapacity: true)
                resampler.process(all.baseAddress! + frame * 2, frames: count, appendingTo: &output)
                produced += output.count / 2
                frame += count
            }
        }
        return Double(Stopwatch.now() - start) / Double(max(produced, 1))
    }

    /// ns per output frame, in 480-frame blocks as the speaker renders.
    private static func timeDrift(_ input: [Float], step: Double) -> Double {
        let resampler = VariableRateResampler(channelCount: 2, inputCapacityFrames: 16384)
        var block = [Float](repeating: 0, count: 480 * 2)
        var frame = 0
        let frames = input.count / 2
        var produced = 0
        let start = Stopwatch.now()
        input.withUnsafeBufferPointer { all in
            while true {
                let writable = min(resampler.writableFrames, frames - frame)
                if writable > 0 {
                    frame += resampler.appendInput(all.baseAddress! + frame * 2, frames: writable)
                }
                let made = block.withUnsafeMutableBufferPointer { resampler.render(into: $0.baseAddress!, frames: 480, step: step) }
                produced += made
                if made == 0 { break }
            }
        }
        return Double(Stopwatch.now() - start) / Double(max(produced, 1))
    }
}

struct ResamplingCost: Codable {
    var stage: String
    var nanosecondsPerFrame: Double
}

struct ResamplingBenchReport: Codable {
    var driftPartsPerMillion: Double
    var paths: [ResamplingQualityReport]
    var cost: [ResamplingCost]
}
