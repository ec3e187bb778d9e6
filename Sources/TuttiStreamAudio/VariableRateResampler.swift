#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CTuttiDSP
import TuttiCore


/// The drift-correction resampler of a network speaker: it reads a timeline at a variable,
/// exactly known rate, so that every output frame's input position is known to far below a
/// sample, which is what room-to-room sync within one frame needs.
///
/// Output frame `k` is the band-limited interpolation of the input at position `x_k`, and
/// `x_{k+1} = x_k + step`, with `step` (input frames per output frame) given to each
/// `render` call by the control loop. The kernel is centred on `x_k` (no group delay): an
/// output at a whole-frame position is that input frame, bit for bit, and an output at
/// `x_k` needs input frames `⌊x_k⌋ − lookaheadFrames + 1 … ⌊x_k⌋ + lookaheadFrames`.
///
/// Filter: a windowed sinc (Kaiser) of `taps` taps with its cutoff at the input Nyquist
/// frequency, tabulated at `phases` fractions and linearly interpolated between them. The
/// cutoff sits at Nyquist rather than below it because with `step ≈ 1` the error at a
/// frequency `f` is the kernel's passband error at `f` plus its leakage at the image
/// `rate − f`, which balance at Nyquist; it also makes the kernel zero at every whole
/// frame but its centre, so interpolation passes through the input samples and the exact
/// copy done for whole-frame positions is the limit of nearby fractions, not a jump.
/// With 32 taps and β = 9 the worst error over all fractions, for a full-scale sine at
/// 48 kHz, is −95 dB at 1 kHz, −92 dB at 10 kHz, −87 dB at 18 kHz and −61 dB (0.008 dB)
/// at 20 kHz.
///
/// Input is indexed by absolute timeline frame: after `reset(firstInputFrame:position:)`
/// the next appended frame is `firstInputFrame`. Frames before it read as silence, so
/// rendering may start before the input does. Input is kept in a preallocated ring and
/// released as soon as the kernel has passed it.
///
/// Position: the integer part is an `Int64` and the fraction is a 64-bit fixed-point
/// count of 2^-64 frames. A `step` in [0.5, 2] is a Double whose bits all lie at or above
/// 2^-64, so it converts to that form exactly and positions are the exact sums of the steps
/// given, however long the stream runs; `position` reports the fraction truncated to 53 bits.
///
/// Thread-safety: not synchronised. All calls must come from one thread at a time (the
/// device render thread once running); it is `Sendable` only so its owner can hand it over.
/// `appendInput`, `render`, `jump`, `reset` and the properties never allocate, lock or block.
///
/// Nothing here is `@inlinable`: callers make one call per period, and the per-sample loop
/// lives inside this module, where it is optimised with the module's own code.
public final class VariableRateResampler: @unchecked Sendable {
    public let channelCount: Int
    public let taps: Int
    public let phases: Int
    /// Input frames that fit beyond the kernel's current window.
    public let inputCapacityFrames: Int

    /// How many input frames past `⌊position⌋` the next output frame needs (`taps / 2`).
    public var lookaheadFrames: Int { taps / 2 }

    /// Row `i` is the kernel at fraction `i / phases` followed by its difference to row
    /// `i + 1`, so an output frame reads one contiguous run of `2 × taps` coefficients.
    private let table: UnsafeMutablePointer<Float>
    /// Interpolated kernel for the path that serves unusual channel counts.
    private let kernel: UnsafeMutablePointer<Float>
    /// One plane per channel, `planeStride` floats apart (the kernel then reads each channel's
    /// window with plain vector loads, no deinterleaving): `storageFrames` ring slots plus
    /// `taps` slots mirroring the first `taps`, so that any
    /// window of `taps` frames is contiguous in memory and the inner loop never wraps.
    private let storage: UnsafeMutablePointer<Float>
    private let storageFrames: Int
    private var planeStride: Int { storageFrames + taps }

    /// Integer part of the next output frame's position.
    private var frame: Int64 = 0
    /// Fraction of the next output frame's position, in units of 2^-64 frames.
    private var fraction: UInt64 = 0
    private var firstInputFrame: Int64 = 0
    /// Oldest frame still in the ring. Below `firstInputFrame` the ring holds `taps` frames
    /// of silence written by `reset`, so windows that straddle the first frame need no
    /// special case; windows entirely before `retainedStart` render as silence.
    private var retainedStart: Int64 = 0
    /// One past the last appended frame.
    private var inputEnd: Int64 = 0

    /// - Parameters:
    ///   - taps: kernel length, even and at least 2. 32 gives the accuracy quoted above.
    ///   - phases: tabulated fractions; the linear interpolation between them errs by about
    ///     −110 dB at 512 (−122 dB at 1024), well under the kernel's own error.
    ///   - kaiserBeta: window shape; larger trades flatness near 20 kHz for accuracy below it.
    ///   - inputCapacityFrames: input that can wait beyond the kernel's window (a few periods of network jitter).
    ///
    /// Allocates and tabulates; do it off the real-time thread. Starts as after
    /// `reset(firstInputFrame: 0, position: FramePosition(frame: 0))`.
    public init(channelCount: Int, taps: Int = 32, phases: Int = 512, kaiserBeta: Double = 9,
                inputCapacityFrames: Int) {
        precondition(channelCount > 0, "VariableRateResampler needs at least one channel")
        precondition(taps >= 2 && taps % 2 == 0, "taps must be even and at least 2, got \(taps)")
        precondition(phases >= 1, "phases must be positive, got \(phases)")
        precondition(inputCapacityFrames > 0, "inputCapacityFrames must be positive")
        self.channelCount = channelCount
        self.taps = taps
        self.phases = phases
        self.inputCapacityFrames = inputCapacityFrames
        storageFrames = inputCapacityFrames + taps
        storage = .allocate(capacity: (storageFrames + taps) * channelCount)
        storage.initialize(repeating: 0, count: (storageFrames + taps) * channelCount)
        kernel = .allocate(capacity: taps)
        kernel.initialize(repeating: 0, count: taps)
        table = .allocate(capacity: phases * 2 * taps)
        table.initialize(repeating: 0, count: phases * 2 * taps)
        Self.fillTable(table, taps: taps, phases: phases, beta: kaiserBeta)
        warmUp()
        reset(firstInputFrame: 0, position: FramePosition(frame: 0))
    }

    /// Runs the render path once, here, so that whatever the Swift runtime sets up on first use
    /// (generic SIMD metadata in unoptimized builds) is not set up later on the real-time thread.
    private func warmUp() {
        let frames = taps + 2
        let silence = [Float](repeating: 0, count: frames * channelCount)
        var scratch = [Float](repeating: 0, count: 2 * channelCount)
        reset(firstInputFrame: 0, position: FramePosition(frame: Int64(taps / 2), fraction: 0.25))
        _ = silence.withUnsafeBufferPointer { appendInput($0.baseAddress!, frames: frames) }
        _ = scratch.withUnsafeMutableBufferPointer { render(into: $0.baseAddress!, frames: 2, step: 1.0001) }
        jump(to: position.advanced(by: 0.5))
        _ = scratch.withUnsafeMutableBufferPointer { render(into: $0.baseAddress!, frames: 1, step: 1) }
    }

    deinit {
        storage.deallocate()
        kernel.deallocate()
        table.deallocate()
    }

    // MARK: State

    /// The input position of the next output frame, exact but for the fraction's truncation
    /// to 53 bits (at most 1.1e-16 frames low).
    public var position: FramePosition {
        FramePosition(frame: frame, fraction: Double(fraction >> 11) * 0x1p-53)
    }

    /// The index after the last appended input frame.
    public var inputEndFrame: Int64 { inputEnd }

    /// Input frames `appendInput` will store now. It may accept more: input the position
    /// has already passed is taken and dropped without using space.
    public var writableFrames: Int { storageFrames - Int(inputEnd - retainedStart) }

    /// Forgets all input and starts over: the next appended frame is `firstInputFrame` and
    /// the next output frame is at `position`.
    public func reset(firstInputFrame: Int64, position: FramePosition) {
        self.firstInputFrame = firstInputFrame
        retainedStart = firstInputFrame - Int64(taps)
        inputEnd = retainedStart
        store(nil, frames: taps)
        frame = position.frame
        fraction = Self.fixedPoint(position.fraction)
        release()
    }

    /// Moves the next output frame to `target` without touching the input; input before
    /// the new kernel window is released. Meant for the initial alignment, forwards or
    /// backwards as long as the input the new window needs is still held (else `reset`).
    public func jump(to target: FramePosition) {
        let start = windowStart(target.frame)
        precondition(start >= retainedStart || retainedStart <= firstInputFrame - Int64(taps),
                     "jump(to: \(target)) needs input before \(retainedStart) that was already released; use reset")
        frame = target.frame
        fraction = Self.fixedPoint(target.fraction)
        release()
    }

    // MARK: Real-time path

    /// Appends up to `frames` interleaved frames after `inputEndFrame` and returns how many
    /// were taken: those that fit, plus any the position has already passed, which are
    /// dropped. The caller keeps the rest and offers them again after the next `render`.
    public func appendInput(_ samples: UnsafePointer<Float>, frames: Int) -> Int {
        precondition(frames >= 0, "cannot append \(frames) frames")
        var source = samples
        var remaining = frames
        let needed = windowStart(frame)
        if inputEnd < needed {
            let skipped = Int(min(Int64(remaining), needed - inputEnd))
            inputEnd += Int64(skipped)
            retainedStart = inputEnd
            source += skipped * channelCount
            remaining -= skipped
        }
        let stored = min(remaining, writableFrames)
        store(source, frames: stored)
        return frames - remaining + stored
    }

    /// Renders up to `frames` interleaved output frames, advancing the position by `step`
    /// input frames per output frame, and returns how many were rendered: fewer when the
    /// next frame's kernel reaches past `inputEndFrame`. Rendering resumes exactly where it
    /// stopped once more input is appended. Input the kernel has passed is released.
    ///
    /// `step` must be in [0.5, 2]: this corrects clock drift, it is not a rate converter
    /// (the cutoff does not follow the step, so a step far above 1 would alias).
    public func render(into output: UnsafeMutablePointer<Float>, frames: Int, step: Double) -> Int {
        precondition(frames >= 0, "cannot render \(frames) frames")
        precondition(step >= 0.5 && step <= 2, "step must be in [0.5, 2], got \(step)")
        let stepWhole = step.rounded(.down)
        let stepFrames = Int64(stepWhole)
        // Exact: `step − stepWhole` is exact and every bit of it lies at or above 2^-64.
        let stepFraction = UInt64((step - stepWhole) * 0x1p64)

        let channels = channelCount
        let storageFrames = self.storageFrames
        let storage = self.storage
        let centre = taps / 2 - 1
        let planeStride = self.planeStride
        // A window starting after this would reach past the input.
        let lastStart = inputEnd - Int64(taps)
        let retainedStart = self.retainedStart

        var whole = frame
        var fraction = self.fraction
        var start = windowStart(whole)
        var slot = Self.slot(of: start, storageFrames: storageFrames)
        var out = output
        var produced = 0
        while produced < frames && start <= lastStart {
            if start < retainedStart {
                out.update(repeating: 0, count: channels)
            } else if fraction == 0 {
                for channel in 0..<channels { out[channel] = storage[channel * planeStride + slot + centre] }
            } else {
                interpolate(storage + slot, fraction: fraction, into: out)
            }
            out += channels
            produced += 1
            let (sum, carry) = fraction.addingReportingOverflow(stepFraction)
            fraction = sum
            let advance = carry ? stepFrames + 1 : stepFrames
            whole += advance
            start += advance
            slot += Int(advance)
            if slot >= storageFrames { slot -= storageFrames }
        }
        frame = whole
        self.fraction = fraction
        release()
        return produced
    }

    // MARK: Internals

    private func windowStart(_ whole: Int64) -> Int64 { whole - Int64(taps / 2) + 1 }

    private static func slot(of inputFrame: Int64, storageFrames: Int) -> Int {
        let slot = Int(inputFrame % Int64(storageFrames))
        return slot < 0 ? slot + storageFrames : slot
    }

    private static func fixedPoint(_ fraction: Double) -> UInt64 {
        // Exact for any fraction ≥ 2^-12 (its last bit is then ≥ 2^-64); smaller ones lose
        // the bits under 2^-64, far below any timing that matters.
        UInt64(fraction * 0x1p64)
    }

    /// Drops input the next window no longer covers. Never past `inputEnd`: frames after
    /// it do not exist yet, and `appendInput` skips them when they arrive.
    private func release() {
        let start = windowStart(frame)
        if start > retainedStart { retainedStart = min(start, inputEnd) }
    }

    /// Writes `frames` frames at `inputEnd` (silence when `source` is nil) and advances it.
    private func store(_ source: UnsafePointer<Float>?, frames: Int) {
        let channels = channelCount
        let planeStride = self.planeStride
        var slot = Self.slot(of: inputEnd, storageFrames: storageFrames)
        var done = 0
        while done < frames {
            let count = min(frames - done, storageFrames - slot)
            for channel in 0..<channels {
                let plane = storage + channel * planeStride
                let destination = plane + slot
                if let source {
                    var from = source + done * channels + channel
                    for index in 0..<count {
                        destination[index] = from.pointee
                        from += channels
                    }
                } else {
                    destination.update(repeating: 0, count: count)
                }
                if slot < taps {
                    (plane + storageFrames + slot).update(from: destination, count: min(count, taps - slot))
                }
            }
            done += count
            slot += count
            if slot == storageFrames { slot = 0 }
        }
        inputEnd += Int64(frames)
    }

    /// One output frame from the `taps`-frame windows starting at `window` in each channel's
    /// plane, at a nonzero fraction.
    @inline(__always)
    private func interpolate(_ window: UnsafePointer<Float>, fraction: UInt64, into out: UnsafeMutablePointer<Float>) {
        let taps = self.taps
        // The high word is the phase row, the low word how far towards the next row.
        let (phase, remainder) = UInt64(phases).multipliedFullWidth(by: fraction)
        let weight = Float(remainder) * 0x1p-64
        let row = UnsafePointer(table + Int(phase) * 2 * taps)
        // Mono and stereo go to the vectorized kernel (CTuttiDSP); other channel counts are
        // rare enough for a plain loop.
        switch channelCount {
        case 1:
            out[0] = tutti_resample_frame_mono(row, row + taps, weight, window, Int32(taps))
        case 2:
            tutti_resample_frame_stereo(row, row + taps, weight, window, window + planeStride, Int32(taps), out)
        default:
            let channels = channelCount
            for j in 0..<taps { kernel[j] = row[j] + weight * row[taps + j] }
            for channel in 0..<channels {
                var sum: Float = 0
                let sample = window + channel * planeStride
                for j in 0..<taps { sum += kernel[j] * sample[j] }
                out[channel] = sum
            }
        }
    }

    /// Tabulates the kernel in Double and normalises each row to unit DC gain (which the
    /// truncated window alone misses by about the stopband level), then stores Float.
    private static func fillTable(_ table: UnsafeMutablePointer<Float>, taps: Int, phases: Int, beta: Double) {
        let half = Double(taps / 2)
        let windowScale = 1 / besselI0(beta)
        func row(_ index: Int) -> [Double] {
            // Whole-frame rows are exactly the identity; computing sin(πk) would leave ~1e-16 residues.
            if index == 0 || index == phases {
                var identity = [Double](repeating: 0, count: taps)
                identity[index == 0 ? taps / 2 - 1 : taps / 2] = 1
                return identity
            }
            let offset = Double(index) / Double(phases)
            var coefficients = (0..<taps).map { j -> Double in
                let t = Double(j - taps / 2 + 1) - offset
                let ratio = t / half
                let window = besselI0(beta * (1 - ratio * ratio).squareRoot()) * windowScale
                return sin(Double.pi * t) / (Double.pi * t) * window
            }
            let total = coefficients.reduce(0, +)
            for j in coefficients.indices { coefficients[j] /= total }
            return coefficients
        }
        var current = row(0)
        for index in 0..<phases {
            let next = row(index + 1)
            let base = table + index * 2 * taps
            for j in 0..<taps {
                base[j] = Float(current[j])
                base[taps + j] = Float(next[j] - current[j])
            }
            current = next
        }
    }

    /// Modified Bessel function of the first kind, order 0, by its power series.
    private static func besselI0(_ x: Double) -> Double {
        var sum = 1.0
        var term = 1.0
        let quarterSquare = x * x / 4
        var k = 1.0
        while term > sum * 1e-17 {
            term *= quarterSquare / (k * k)
            sum += term
            k += 1
        }
        return sum
    }
}
