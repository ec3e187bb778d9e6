import TuttiCore

/// Float32 → device sample format, into preallocated bytes. Real-time safe.
public enum SampleConversion {
    /// Converts `count` samples; out-of-range values clip. Integer formats round to nearest
    /// without dither, so a float signal that came from integers converts back exactly.
    @inlinable
    public static func convert(_ source: UnsafePointer<Float>, count: Int, to format: SampleFormat, into destination: UnsafeMutableRawPointer) {
        switch format {
        case .float32:
            destination.copyMemory(from: source, byteCount: count * 4)
        case .int16:
            let out = destination.assumingMemoryBound(to: Int16.self)
            for i in 0..<count {
                let scaled = (source[i] * 32768).rounded()
                out[i] = Int16(littleEndian: Int16(max(-32768, min(32767, scaled))))
            }
        case .int24:
            let out = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                let scaled = (source[i] * 8_388_608).rounded()
                let value = Int32(max(-8_388_608, min(8_388_607, scaled)))
                out[3 * i] = UInt8(truncatingIfNeeded: value)
                out[3 * i + 1] = UInt8(truncatingIfNeeded: value >> 8)
                out[3 * i + 2] = UInt8(truncatingIfNeeded: value >> 16)
            }
        }
    }
}
