import CAllocationCounter
import CTuttiDSP
import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiMedia
import TuttiSimulation

@Suite struct VariableRateResamplerTests {
    /// With whole steps from a whole position every output frame is one input frame, so the
    /// output must be the input bit for bit (negative zero and subnormals included), through
    /// a small ring that wraps many times, with appends and renders of awkward sizes. Starting
    /// before the first input frame gives silence first; starting after it skips input.
    @Test(arguments: [(1, 0), (2, 0), (3, 0), (2, 7), (2, -40)] as [(Int, Int64)])
    func wholeStepsCopyTheInputExactly(channels: Int, startOffset: Int64) {
        let first: Int64 = 172_800_000  // an hour into the timeline
        let frameCount = 4000
        var random = SplitMix64(seed: 1)
        var input = (0..<frameCount * channels).map { _ in Float.random(in: -1...1, using: &random) }
        input[3] = -0.0
        input[4] = .leastNonzeroMagnitude
        input[5] = 1
        let resampler = VariableRateResampler(channelCount: channels, inputCapacityFrames: 100)
        resampler.reset(firstInputFrame: first, position: FramePosition(frame: first + startOffset))

        let appendSizes = [1, 7, 13, 101, 3, 55]
        let renderSizes = [3, 17, 1, 479, 31]
        var block = [Float](repeating: .nan, count: 479 * channels)
        var output: [Float] = []
        var appended = 0
        var call = 0
        while true {
            let offer = min(appendSizes[call % appendSizes.count], frameCount - appended)
            appended += input.withUnsafeBufferPointer {
                resampler.appendInput($0.baseAddress! + appended * channels, frames: offer)
            }
            let request = renderSizes[call % renderSizes.count]
            let rendered = block.withUnsafeMutableBufferPointer {
                resampler.render(into: $0.baseAddress!, frames: request, step: 1)
            }
            output += block[0..<rendered * channels]
            call += 1
            if appended == frameCount && rendered < request { break }
        }

        // The last frame rendered is the last whose kernel lies within the input.
        let expectedFrames = frameCount - resampler.lookaheadFrames - Int(startOffset)
        #expect(output.count == expectedFrames * channels)
        var mismatches = 0
        for k in 0..<min(expectedFrames, output.count / channels) {
            let inputFrame = Int(startOffset) + k
            for channel in 0..<channels {
                let expected = inputFrame < 0 ? Float(0) : input[inputFrame * channels + channel]
                if output[k * channels + channel].bitPattern != expected.bitPattern { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
        #expect(resampler.position == FramePosition(frame: first + startOffset + Int64(expectedFrames)))
    }

    /// A stereo sine resampled at a fractional step from a fractional start, 3 × 10⁹ frames
    /// into the timeline, against the analytic sine at each output frame's exact position.
    /// Measured worst error over 48 000 frames (all fractions), 32 taps, β = 9, either step:
    /// 1 kHz −95.1 dB, 10 kHz −91.8 dB, 18 kHz −87.3 dB, 20 kHz −61.0 dB of full scale.
    @Test(arguments: [1_000.0, 10_000.0, 18_000.0, 20_000.0], [1.0003, 0.9997])
    func sineMatchesTheAnalyticSignalAtExactPositions(frequency: Double, step: Double) {
        let limit: [Double: Double] = [1_000: -93, 10_000: -90, 18_000: -85, 20_000: -59]
        let error = Self.peakSineError(frequency: frequency, step: step, channels: 2, taps: 32)
        #expect(error <= limit[frequency]!, "peak error \(error) dB")
    }

    /// The mono path, the path for other channel counts, and tap counts that leave a
    /// scalar tail after the 8-wide blocks, at 10 kHz. Measured: −91.7 to −91.8 dB with 32 taps,
    /// −91.5 dB with 20 (at 10 kHz the window's ripple dominates, not its length).
    @Test(arguments: [(1, 32), (3, 32), (1, 20), (2, 20), (3, 20)] as [(Int, Int)])
    func everyChannelPathInterpolatesAlike(channels: Int, taps: Int) {
        let error = Self.peakSineError(frequency: 10_000, step: 1.0003, channels: channels, taps: taps)
        #expect(error <= -89, "peak error \(error) dB")
    }

    /// After every call with a different step, the position is the exact sum of the steps
    /// given, even billions of frames in, where a Double position would resolve only 5e-7.
    @Test(arguments: [FramePosition(frame: 3_000_000_000, fraction: 0.25),
                      FramePosition(frame: -17, fraction: 0.123456789)])
    func positionIsTheExactSumOfSteps(start: FramePosition) {
        let resampler = VariableRateResampler(channelCount: 1, inputCapacityFrames: 2048)
        resampler.reset(firstInputFrame: start.frame - 100, position: start)
        let zeros = [Float](repeating: 0.25, count: 2048)
        var block = [Float](repeating: 0, count: 700)
        var random = SplitMix64(seed: 3)
        var exact = Exact.fixed(start)
        var produced = 0
        var worst = 0.0
        while produced < 300_000 {
            _ = resampler.appendInput(zeros, frames: min(resampler.writableFrames, zeros.count))
            let step = Double.random(in: 0.999...1.001, using: &random)
            let rendered = resampler.render(into: &block, frames: Int.random(in: 1...700, using: &random), step: step)
            produced += rendered
            exact += Int128(rendered) * Exact.fixed(step: step)
            worst = max(worst, abs(Exact.frames(resampler.position, minus: exact)))
        }
        #expect(worst <= 1e-15)
    }

    /// Rendering with little input stops exactly at the first frame whose kernel reaches
    /// past the input, and picks up when more arrives: the output is bit-identical to one
    /// uninterrupted run, with steps that change every 480 output frames.
    @Test func stopsWhenInputRunsOutAndResumesSeamlessly() {
        let channels = 2
        let first: Int64 = 123_456_789
        let frameCount = 20_000
        var random = SplitMix64(seed: 4)
        let input = (0..<frameCount * channels).map { _ in Float.random(in: -1...1, using: &random) }
        let start = FramePosition(frame: first + 20, fraction: 0.6180339887)
        let steps = (0..<100).map { 1 + 0.0005 * sin(Double($0)) }
        func step(at outputFrame: Int) -> Double { steps[outputFrame / 480] }

        // The exact position of every output frame, to know where each must stop.
        var positions: [Int128] = [Exact.fixed(start)]
        for k in 0..<frameCount { positions.append(positions[k] + Exact.fixed(step: step(at: k))) }
        let lookahead = Int64(VariableRateResampler(channelCount: 1, inputCapacityFrames: 1).lookaheadFrames)
        func renderable(inputEnd: Int64) -> Int {
            positions.firstIndex { Exact.frame($0) + lookahead >= inputEnd }!
        }

        // Uninterrupted: all input up front.
        let whole = VariableRateResampler(channelCount: channels, inputCapacityFrames: frameCount)
        whole.reset(firstInputFrame: first, position: start)
        #expect(whole.appendInput(input, frames: frameCount) == frameCount)
        var reference = [Float](repeating: 0, count: frameCount * channels)
        var done = 0
        while true {
            let request = 480 - done % 480
            let rendered = reference.withUnsafeMutableBufferPointer {
                whole.render(into: $0.baseAddress! + done * channels, frames: request, step: step(at: done))
            }
            done += rendered
            if rendered < request { break }
        }
        #expect(done == renderable(inputEnd: first + Int64(frameCount)))

        // Starved: a small ring, input in odd amounts, renders that keep running dry.
        let starved = VariableRateResampler(channelCount: channels, inputCapacityFrames: 300)
        starved.reset(firstInputFrame: first, position: start)
        var output = [Float](repeating: .nan, count: frameCount * channels)
        let appendSizes = [1, 7, 64, 129, 333, 2]
        let renderSizes = [1000, 5, 97, 480, 1]
        var appended = 0
        var produced = 0
        var stops = 0
        var wrongStops = 0
        for call in 0... {
            let offer = min(appendSizes[call % appendSizes.count], frameCount - appended)
            let free = starved.writableFrames
            let accepted = input.withUnsafeBufferPointer {
                starved.appendInput($0.baseAddress! + appended * channels, frames: offer)
            }
            #expect(accepted == min(offer, free))
            appended += accepted
            let request = min(renderSizes[call % renderSizes.count], 480 - produced % 480)
            let rendered = output.withUnsafeMutableBufferPointer {
                starved.render(into: $0.baseAddress! + produced * channels, frames: request, step: step(at: produced))
            }
            produced += rendered
            if rendered < request {
                stops += 1
                if produced != renderable(inputEnd: starved.inputEndFrame) { wrongStops += 1 }
                if appended == frameCount { break }
            }
        }
        #expect(stops > 100)
        #expect(wrongStops == 0)
        #expect(produced == done)
        #expect(output.prefix(produced * channels).map(\.bitPattern) == reference.prefix(done * channels).map(\.bitPattern))
    }

    /// Jumping forward, within the input held or past all of it (later input before the new
    /// window is then taken and dropped, whatever the capacity), renders exactly what a
    /// resampler started at the target renders.
    @Test func jumpMatchesAFreshStart() {
        let first: Int64 = 48_000
        let frameCount = 10_000
        var random = SplitMix64(seed: 5)
        let input = (0..<frameCount).map { _ in Float.random(in: -1...1, using: &random) }
        func run(_ resampler: VariableRateResampler, from offset: Int) -> [Float] {
            var output = [Float](repeating: 0, count: 1000)
            var appended = offset
            var produced = 0
            while produced < 1000 {
                appended += input.withUnsafeBufferPointer {
                    resampler.appendInput($0.baseAddress! + appended, frames: min(frameCount - appended, 50))
                }
                produced += output.withUnsafeMutableBufferPointer {
                    resampler.render(into: $0.baseAddress! + produced, frames: 1000 - produced, step: 1.0002)
                }
            }
            return output
        }
        for target in [FramePosition(frame: first + 150, fraction: 0.25),
                       FramePosition(frame: first + 700, fraction: 0.25),
                       FramePosition(frame: first + 6000, fraction: 0.75)] {
            // Fed from shortly before the target, so it never has input to drop.
            let fresh = VariableRateResampler(channelCount: 1, inputCapacityFrames: 200)
            fresh.reset(firstInputFrame: target.frame - 100, position: target)
            let expected = run(fresh, from: Int(target.frame - 100 - first))

            let jumped = VariableRateResampler(channelCount: 1, inputCapacityFrames: 200)
            jumped.reset(firstInputFrame: first, position: FramePosition(frame: first, fraction: 0.5))
            #expect(jumped.appendInput(input, frames: 200) == 200)
            var scratch = [Float](repeating: 0, count: 100)
            #expect(jumped.render(into: &scratch, frames: 100, step: 1) == 100)
            jumped.jump(to: target)
            #expect(jumped.position == target)
            #expect(run(jumped, from: 200).map(\.bitPattern) == expected.map(\.bitPattern))
        }
    }

    /// Thousands of append + render periods on a thread of their own allocate nothing.
    /// A deliberate allocation under the same counter proves it is counting on this thread.
    /// The dispatched kernel (AVX on this machine, if it has AVX) and the baseline (SSE) give the
    /// same bits, for every tap count the resampler allows around the vector width: a simulated
    /// house replays bit for bit on any x86-64 machine.
    @Test(arguments: [2, 6, 8, 14, 16, 20, 32, 34])
    func everyKernelGivesTheSameBits(taps: Int) {
        var random = SplitMix64(seed: UInt64(taps))
        func samples(_ count: Int) -> [Float] { (0..<count).map { _ in Float.random(in: -1...1, using: &random) } }
        var mismatches = 0
        for _ in 0..<500 {
            let row = samples(taps), difference = samples(taps).map { $0 * 0.01 }
            let left = samples(taps), right = samples(taps)
            let weight = Float.random(in: 0..<1, using: &random)
            let mono = tutti_resample_frame_mono(row, difference, weight, left, Int32(taps))
            let monoBaseline = tutti_resample_frame_mono_baseline(row, difference, weight, left, Int32(taps))
            var stereo = [Float](repeating: 0, count: 2), stereoBaseline = [Float](repeating: 0, count: 2)
            tutti_resample_frame_stereo(row, difference, weight, left, right, Int32(taps), &stereo)
            tutti_resample_frame_stereo_baseline(row, difference, weight, left, right, Int32(taps), &stereoBaseline)
            if mono.bitPattern != monoBaseline.bitPattern || stereo.map(\.bitPattern) != stereoBaseline.map(\.bitPattern) { mismatches += 1 }
            // Mono and stereo are one computation: the left channel is the mono frame.
            if stereo[0].bitPattern != mono.bitPattern { mismatches += 1 }
        }
        #expect(mismatches == 0, "AVX in use: \(tutti_resample_uses_avx() != 0)")
    }

    @Test func appendAndRenderDoNotAllocate() throws {
        final class Outcome: Sendable {
            let allocations = Atomic<Int64>(-1)
            let control = Atomic<Int64>(-1)
            let produced = Atomic<Int>(0)
        }
        let outcome = Outcome()
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            let channels = 2
            let period = 128
            let resampler = VariableRateResampler(channelCount: channels, inputCapacityFrames: 4 * period)
            resampler.reset(firstInputFrame: 1_000_000_000, position: FramePosition(frame: 1_000_000_040, fraction: 0.3))
            let input = UnsafeMutablePointer<Float>.allocate(capacity: period * channels)
            input.initialize(repeating: 0.5, count: period * channels)
            let output = UnsafeMutablePointer<Float>.allocate(capacity: period * channels)
            output.initialize(repeating: 0, count: period * channels)
            var produced = 0
            tutti_alloc_track_begin()
            for call in 0..<3000 {
                let step = 1 + 0.0004 * Double(call % 7 - 3)
                _ = resampler.appendInput(input, frames: period)
                produced += resampler.render(into: output, frames: period, step: step)
                if call == 1000 { resampler.jump(to: resampler.position.advanced(by: 3.5)) }
            }
            outcome.allocations.store(tutti_alloc_track_end(), ordering: .releasing)
            outcome.produced.store(produced, ordering: .releasing)

            tutti_alloc_track_begin()
            let garbage = [Int](repeating: produced, count: 64)
            withExtendedLifetime(garbage) {}
            outcome.control.store(tutti_alloc_track_end(), ordering: .releasing)
            input.deallocate()
            output.deallocate()
            finished.signal()
        }
        thread.start()
        // The wait is a guard only: 3000 short renders take milliseconds.
        try #require(finished.wait(timeout: .now() + 120) == .success, "the resampler thread did not finish within 120 s")
        #expect(outcome.control.load(ordering: .acquiring) > 0)
        #expect(outcome.allocations.load(ordering: .acquiring) == 0)
        #expect(outcome.produced.load(ordering: .acquiring) > 3000 * 120)
    }

    // MARK: Helpers

    /// Worst error, in dB of full scale, of a full-scale sine (a different phase per channel)
    /// resampled at `step` from a fractional start 3 × 10⁹ frames in, over 48 000 frames.
    static func peakSineError(frequency: Double, step: Double, channels: Int, taps: Int) -> Double {
        let rate = 48_000.0
        // 48 frames is a whole number of periods of every tested frequency, so phases are
        // reduced exactly by taking frames modulo 48.
        #expect((frequency * 48 / rate).rounded() == frequency * 48 / rate)
        let first: Int64 = 3_000_000_011
        let start = FramePosition(frame: first + 40, fraction: 0.3710937)
        let outputFrames = 48_000
        let inputFrames = Int(Double(outputFrames) * step) + 100
        let omega = 2 * Double.pi * frequency / rate
        func signal(_ frame: Int64, _ fraction: Double, _ channel: Int) -> Double {
            let cycle = Double(((frame % 48) + 48) % 48) + fraction
            return sin(omega * cycle + 0.7 * Double(channel))
        }
        var input = [Float](repeating: 0, count: inputFrames * channels)
        for i in 0..<inputFrames {
            for channel in 0..<channels {
                input[i * channels + channel] = Float(signal(first + Int64(i), 0, channel))
            }
        }
        let resampler = VariableRateResampler(channelCount: channels, taps: taps, inputCapacityFrames: inputFrames)
        resampler.reset(firstInputFrame: first, position: start)
        #expect(resampler.appendInput(input, frames: inputFrames) == inputFrames)
        var output = [Float](repeating: .nan, count: outputFrames * channels)
        var produced = 0
        while produced < outputFrames {
            let rendered = output.withUnsafeMutableBufferPointer {
                resampler.render(into: $0.baseAddress! + produced * channels, frames: min(480, outputFrames - produced), step: step)
            }
            #expect(rendered > 0)
            if rendered == 0 { return .infinity }
            produced += rendered
        }

        var worst = 0.0
        var position = Exact.fixed(start)
        let increment = Exact.fixed(step: step)
        for k in 0..<outputFrames {
            for channel in 0..<channels {
                let expected = signal(Exact.frame(position), Exact.fraction(position), channel)
                worst = max(worst, abs(Double(output[k * channels + channel]) - expected))
            }
            position += increment
        }
        return 20 * log10(worst)
    }
}

/// Positions as exact integers of 2^-64 frames: every Double step in [0.5, 2] and every
/// fraction used here is a whole number of those units, so sums are exact.
private enum Exact {
    static let one = Int128(1) << 64

    static func fixed(_ position: FramePosition) -> Int128 {
        Int128(position.frame) * one + Int128(exactly: position.fraction * 0x1p64)!
    }

    static func fixed(step: Double) -> Int128 { Int128(exactly: step * 0x1p64)! }

    static func frame(_ position: Int128) -> Int64 { Int64(position >> 64) }

    static func fraction(_ position: Int128) -> Double {
        Double(UInt64(truncatingIfNeeded: position)) * 0x1p-64
    }

    /// `position − exact` in frames.
    static func frames(_ position: FramePosition, minus exact: Int128) -> Double {
        Double(position.frame - frame(exact)) + (position.fraction - fraction(exact))
    }
}
