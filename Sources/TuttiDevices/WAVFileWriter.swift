import TuttiCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes a RIFF/WAVE file incrementally and fixes its sizes on `close()`.
/// PCM for s16/s24, IEEE float for f32. Not thread-safe: one thread owns it at a time
/// (devices create it, then hand it to their writer thread).
public final class WAVFileWriter: @unchecked Sendable {
    public let path: String
    public let format: AudioFormat
    public private(set) var framesWritten: Int64 = 0
    private var file: UnsafeMutablePointer<FILE>?
    private var scratch: UnsafeMutableRawPointer
    private var scratchBytes: Int

    public init(path: String, format: AudioFormat) throws(DeviceError) {
        guard let handle = fopen(path, "wb") else {
            throw DeviceError(device: "wav:\(path)", reason: "cannot create file: \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.format = format
        file = handle
        scratchBytes = 4096 * format.bytesPerFrame
        scratch = .allocate(byteCount: scratchBytes, alignment: 16)
        writeHeader(dataBytes: 0)
    }

    deinit {
        if file != nil { try? close() }
        scratch.deallocate()
    }

    /// Appends `frames` interleaved Float32 frames, converting to the file's sample format.
    public func write(_ samples: UnsafePointer<Float>, frames: Int) throws(DeviceError) {
        guard let file else { return }
        let needed = frames * format.bytesPerFrame
        if needed > scratchBytes {
            scratch.deallocate()
            scratchBytes = needed
            scratch = .allocate(byteCount: needed, alignment: 16)
        }
        SampleConversion.convert(samples, count: frames * format.channelCount, to: format.sampleFormat, into: scratch)
        guard fwrite(scratch, 1, needed, file) == needed else {
            throw DeviceError(device: "wav:\(path)", reason: "write failed: \(String(cString: strerror(errno)))")
        }
        framesWritten += Int64(frames)
    }

    /// Patches the header sizes and closes the file.
    public func close() throws(DeviceError) {
        guard let handle = file else { return }
        let dataBytes = framesWritten * Int64(format.bytesPerFrame)
        fflush(handle)
        fseek(handle, 0, SEEK_SET)
        writeHeader(dataBytes: dataBytes)
        let failed = fclose(handle) != 0
        file = nil
        if failed { throw DeviceError(device: "wav:\(path)", reason: "close failed: \(String(cString: strerror(errno)))") }
    }

    private func writeHeader(dataBytes: Int64) {
        var header: [UInt8] = []
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { header.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { header.append(contentsOf: $0) } }
        let isFloat = format.sampleFormat == .float32
        let data = UInt32(clamping: dataBytes)
        header.append(contentsOf: Array("RIFF".utf8))
        u32(UInt32(clamping: Int64(data) + (isFloat ? 50 : 36)))
        header.append(contentsOf: Array("WAVEfmt ".utf8))
        u32(isFloat ? 18 : 16)
        u16(isFloat ? 3 : 1)
        u16(UInt16(format.channelCount))
        u32(UInt32(format.sampleRate))
        u32(UInt32(format.sampleRate * format.bytesPerFrame))
        u16(UInt16(format.bytesPerFrame))
        u16(UInt16(format.sampleFormat.bytesPerSample * 8))
        if isFloat {
            u16(0)
            header.append(contentsOf: Array("fact".utf8))
            u32(4)
            u32(UInt32(clamping: framesWritten))
        }
        header.append(contentsOf: Array("data".utf8))
        u32(data)
        _ = header.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    }
}
