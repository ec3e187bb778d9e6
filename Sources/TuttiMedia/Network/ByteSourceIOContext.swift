import CFFmpeg

/// Lets libavformat read a `MediaByteSource` through a custom AVIOContext, so FFmpeg demuxes
/// bytes that Tutti fetches itself (with its own retries, caching and buffering measures).
///
/// Not thread-safe: owned by one decoder and used from its thread. The AVIOContext must be
/// detached from its AVFormatContext (closed) before this object is released.
final class ByteSourceIOContext {
    let source: any MediaByteSource
    private(set) var context: UnsafeMutablePointer<AVIOContext>?
    /// The stream position FFmpeg reads from next.
    private(set) var position: Int64 = 0
    /// The error that ended reading, if the source failed (FFmpeg only sees EIO).
    private(set) var failure: MediaError?

    private static let bufferSize: Int32 = 64 * 1024

    init(source: any MediaByteSource) {
        self.source = source
        let buffer = av_malloc(Int(Self.bufferSize))!.assumingMemoryBound(to: UInt8.self)
        let opaque = Unmanaged.passUnretained(self).toOpaque()
        context = avio_alloc_context(buffer, Self.bufferSize, 0, opaque, { opaque, buffer, size in
            let io = Unmanaged<ByteSourceIOContext>.fromOpaque(opaque!).takeUnretainedValue()
            return io.read(into: buffer!, count: Int(size))
        }, nil, { opaque, offset, whence in
            let io = Unmanaged<ByteSourceIOContext>.fromOpaque(opaque!).takeUnretainedValue()
            return io.seek(offset: offset, whence: whence)
        })
        context!.pointee.seekable = source.isSeekable ? AVIO_SEEKABLE_NORMAL : 0
    }

    deinit {
        if context != nil {
            av_freep(&context!.pointee.buffer)
            avio_context_free(&context)
        }
    }

    private func read(into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int32 {
        do throws(MediaError) {
            let got = try source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: count), at: position)
            if got == 0 { return FFmpeg.eof }
            position += Int64(got)
            return Int32(got)
        } catch {
            failure = error
            return tutti_averror(EIO)
        }
    }

    private func seek(offset: Int64, whence: Int32) -> Int64 {
        if whence & AVSEEK_SIZE != 0 { return source.length ?? -1 }
        let target: Int64
        switch whence & ~AVSEEK_FORCE {
        case SEEK_SET: target = offset
        case SEEK_CUR: target = position + offset
        case SEEK_END:
            guard let length = source.length else { return Int64(tutti_averror(ESPIPE)) }
            target = length + offset
        default: return Int64(tutti_averror(EINVAL))
        }
        guard target >= 0 else { return Int64(tutti_averror(EINVAL)) }
        // The bytes are fetched by the next read; a far seek becomes a range request there.
        position = target
        return target
    }
}
