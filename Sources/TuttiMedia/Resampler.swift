import CSoxr

/// Sample-rate conversion of interleaved Float32 with libsoxr.
///
/// One resampler is kept across gapless items of the same input rate, so the joins between
/// tracks stay continuous and the total length is the exact rounding of the whole input.
/// Not thread-safe.
public final class Resampler {
    public enum Quality: Sendable {
        case quick, low, medium, high, veryHigh

        var recipe: UInt {
            switch self {
            case .quick: UInt(SOXR_QQ)
            case .low: UInt(SOXR_LQ)
            case .medium: UInt(SOXR_MQ)
            case .high: UInt(SOXR_HQ)
            case .veryHigh: UInt(SOXR_VHQ)
            }
        }
    }

    public let inputRate: Int
    public let outputRate: Int
    public let channelCount: Int
    private let soxr: soxr_t

    public init(inputRate: Int, outputRate: Int, channelCount: Int, quality: Quality = .high) throws(MediaError) {
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channelCount = channelCount
        var error: soxr_error_t? = nil
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var q = soxr_quality_spec(quality.recipe, 0)
        // One thread: libsoxr's OpenMP mode splits channels and measured no faster for stereo.
        var runtime = soxr_runtime_spec(1)
        guard let created = soxr_create(Double(inputRate), Double(outputRate), UInt32(channelCount), &error, &io, &q, &runtime),
              error == nil else {
            throw MediaError(.unsupported, input: "resampler", reason: "cannot convert \(inputRate) Hz to \(outputRate) Hz: \(error.map { String(cString: $0) } ?? "unknown")")
        }
        soxr = created
    }

    deinit { soxr_delete(soxr) }

    /// Converts `frames` frames from `input`, appending the output to `output`.
    public func process(_ input: UnsafePointer<Float>, frames: Int, appendingTo output: inout [Float]) {
        var offset = 0
        while offset < frames {
            let chunk = frames - offset
            let room = chunk * outputRate / inputRate + 64
            let base = output.count
            output.append(contentsOf: repeatElement(0, count: room * channelCount))
            var consumed = 0
            var produced = 0
            output.withUnsafeMutableBufferPointer { buffer in
                _ = soxr_process(soxr, input + offset * channelCount, chunk, &consumed,
                                 buffer.baseAddress! + base, room, &produced)
            }
            output.removeLast((room - produced) * channelCount)
            offset += consumed
            if consumed == 0 && produced == 0 { break }
        }
    }

    /// Ends the input and appends the remaining output (the filter's tail).
    public func flush(appendingTo output: inout [Float]) {
        let room = 4096
        while true {
            let base = output.count
            output.append(contentsOf: repeatElement(0, count: room * channelCount))
            var produced = 0
            output.withUnsafeMutableBufferPointer { buffer in
                _ = soxr_process(soxr, nil, 0, nil, buffer.baseAddress! + base, room, &produced)
            }
            output.removeLast((room - produced) * channelCount)
            if produced == 0 { break }
        }
    }
}
