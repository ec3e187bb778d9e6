import CFFmpeg
import TuttiCore

#if canImport(Glibc)
import Glibc
#endif

/// Demuxes and decodes one audio input with libavformat/libavcodec and delivers interleaved
/// Float32 at the source's sample rate, converted by libswresample to `outputChannelCount`.
///
/// Gapless: FFmpeg trims encoder delay and padding from LAME/Xing headers and Opus pre-skip.
/// For MP4 this type applies the edit list itself, from the file's boxes (libavformat rounds it
/// to the movie timescale), and trims the end padding to the edit or iTunSMPB length, which
/// FFmpeg leaves in, so a track yields exactly its original samples.
///
/// Not thread-safe: use from one thread at a time.
public final class AudioFileDecoder {
    public let info: TrackInfo
    public let outputChannelCount: Int
    /// Packets the decoder rejected as corrupt and skipped.
    public private(set) var corruptPacketCount = 0
    /// A read error other than end of file (I/O error, invalid data mid-stream), if one ended decoding early.
    public private(set) var readError: String?
    /// Frames delivered so far, counted from the track start (after a seek, from the seek target).
    public private(set) var position: Int64 = 0
    /// `read` gathers decoded frames until it has at least this many (or the input ends):
    /// fewer, larger blocks for the resampler and the ring. Local files read 16384 frames at a
    /// time; streams (network, pipes) 0, so each decoded frame is delivered as soon as it is
    /// there. `position` counts what was delivered.
    ///
    /// The first read after opening or seeking returns the first decoded frame alone, and the
    /// block doubles from read to read up to this size: a player starts (and a house streams)
    /// as soon as the first frame is decoded, not a block later.
    public var preferredBlockFrames: Int
    /// This read's gathering goal, ramping up to `preferredBlockFrames`.
    private var blockFramesGoal = 0
    private var pendingError: MediaError?

    private var format: UnsafeMutablePointer<AVFormatContext>?
    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var converter: OpaquePointer?
    private var converterInput: (format: Int32, channels: Int32, rate: Int32)?
    private let streamIndex: Int32
    private let timeBase: AVRational
    private let startTimestamp: Int64
    /// Frames the track really has, when the container says so exactly and FFmpeg does not trim to it.
    private let exactFrameCount: Int64?
    /// Frames to start decoding before a seek target (see `init`).
    private let seekPreRoll: Int64
    /// After a seek: drop decoded frames before this track frame.
    private var discardBefore: Int64 = 0
    private var needsPositionFromTimestamp = false
    private var draining = false
    private var finished = false

    public var sampleRate: Int { info.sampleRate }

    /// The bytes FFmpeg reads when the input is not a local file (a URL), for buffering measures.
    public var byteSource: (any MediaByteSource)? { customIO?.source }
    /// The byte offset the demuxer reads from next (with a byte source).
    public var bytePosition: Int64? { customIO?.position }
    private let customIO: ByteSourceIOContext?

    /// Opens `path`: a file, `-`, `pipe:PATH`, an http(s) URL, or an HLS playlist URL.
    /// - Parameters:
    ///   - byteSource: bytes to demux instead of opening `path` (which then only names them).
    ///   - network: opens URLs; without it a URL is refused.
    ///   - cancellation: lets another thread abort a network read this decoder is blocked in.
    ///   - networkEvents: retries and radio titles of a URL input (for HLS: its retries).
    public init(path: String, outputChannelCount: Int? = nil, byteSource: (any MediaByteSource)? = nil,
                network: (any NetworkInputOpener)? = nil, cancellation: InputCancellation? = nil,
                networkEvents: (@Sendable (NetworkInputEvent) -> Void)? = nil) throws(MediaError) {
        _ = FFmpeg.quietLogging
        let location = try InputLocation(path)
        preferredBlockFrames = location.isStream || byteSource != nil ? 0 : 16384
        var source = byteSource
        if let byteSource {
            cancellation?.register(byteSource)
        } else if location.kind == .network || location.kind == .hls {
            guard let network else {
                throw MediaError(.unsupported, input: path, reason: "network inputs are not enabled in this process")
            }
            source = try network.open(path, isPlaylist: location.kind == .hls, cancellation: cancellation, events: networkEvents)
        }
        // An HLS source given unopened opens here (opening again only waits).
        let hls = source as? any PlaylistByteSource
        try hls?.open()
        customIO = source.map { ByteSourceIOContext(source: $0) }
        var ctx: UnsafeMutablePointer<AVFormatContext>? = avformat_alloc_context()
        if let customIO {
            ctx!.pointee.pb = customIO.context
            // Bytes arrive over the network: probe and analyze only what the start needs
            // (FFmpeg's defaults read up to 5 MB / 5 s before the first packet).
            ctx!.pointee.probesize = 64 * 1024
            ctx!.pointee.max_analyze_duration = Int64(AV_TIME_BASE) / 2
        }
        // MP4 with a simple edit list: Tutti trims the priming and padding itself (see MP4Timing).
        let mp4Timing = location.isStream ? nil : MP4Timing.soundTracks(path: path)
        var options: OpaquePointer? = nil
        if mp4Timing != nil { av_dict_set(&options, "ignore_editlist", "1", 0) }
        let demuxer = location.demuxer(options: &options)
        let openStatus = avformat_open_input(&ctx, location.url, demuxer, &options)
        av_dict_free(&options)
        guard openStatus >= 0, let ctx else {
            if let failure = customIO?.failure { throw failure }
            throw Self.openError(path: path, status: openStatus)
        }
        format = ctx
        // From here on `deinit` does not run if we throw, so clean up explicitly.
        var streamInfoStatus = avformat_find_stream_info(ctx, nil)
        let index = av_find_best_stream(ctx, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        guard index >= 0, let stream = ctx.pointee.streams[Int(index)] else {
            let name = String(cString: ctx.pointee.iformat.pointee.name)
            avformat_close_input(&format)
            throw MediaError(.notAudio, input: path, reason: streamInfoStatus < 0
                ? "not an audio file (\(FFmpeg.message(streamInfoStatus)))"
                : "no audio stream (container \(name))")
        }
        streamInfoStatus = 0
        let parameters = stream.pointee.codecpar!
        guard let decoder = avcodec_find_decoder(parameters.pointee.codec_id) else {
            avformat_close_input(&format)
            throw MediaError(.unsupported, input: path, reason: "no decoder for codec \(String(cString: avcodec_get_name(parameters.pointee.codec_id)))")
        }
        var codecContext = avcodec_alloc_context3(decoder)
        avcodec_parameters_to_context(codecContext, parameters)
        // Needed for correct trimming of priming/padding samples (skip-samples side data).
        codecContext!.pointee.pkt_timebase = stream.pointee.time_base
        codecContext!.pointee.thread_count = 1
        let codecStatus = avcodec_open2(codecContext, decoder, nil)
        guard codecStatus >= 0 else {
            avcodec_free_context(&codecContext)
            avformat_close_input(&format)
            throw MediaError(.unsupported, input: path, reason: "cannot open \(String(cString: decoder.pointee.name)) decoder: \(FFmpeg.message(codecStatus))")
        }
        codec = codecContext
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        streamIndex = index
        timeBase = stream.pointee.time_base
        let start = stream.pointee.start_time
        let trackTiming = mp4Timing?[stream.pointee.id]
        let smpb = FFmpeg.dictionaryValue(ctx.pointee.metadata, "iTunSMPB")
        if let trackTiming {
            // Priming: the edit list's media time, or iTunSMPB's in files without an edit list.
            let priming = trackTiming.priming ?? smpb.flatMap(Self.priming(fromITunSMPB:)) ?? 0
            startTimestamp = av_rescale_q(priming, AVRational(num: 1, den: Int32(trackTiming.timescale)), timeBase)
            // The first frames are priming: position them from their timestamps so they are dropped.
            needsPositionFromTimestamp = priming > 0
        } else {
            startTimestamp = start == FFmpeg.noPTS ? 0 : start
        }

        let rate = Int(codecContext!.pointee.sample_rate)
        let channels = Int(codecContext!.pointee.ch_layout.nb_channels)
        guard rate > 0, channels > 0 else {
            avcodec_free_context(&codec)
            avformat_close_input(&format)
            throw MediaError(.corrupt, input: path, reason: "audio stream has no sample rate or channels")
        }
        self.outputChannelCount = outputChannelCount ?? channels

        let containerName = String(cString: ctx.pointee.iformat.pointee.name)
        let isMP4Family = containerName.hasPrefix("mov,")
        let smpbFrames = smpb.flatMap(Self.originalLength(fromITunSMPB:))
        var exactFrames: Int64? = nil
        // HLS fMP4: the first fragment's boxes do not describe the whole stream.
        if isMP4Family, hls == nil {
            if let smpbFrames {
                exactFrames = smpbFrames
            } else if let trackTiming {
                exactFrames = av_rescale_q(trackTiming.frameCount, AVRational(num: 1, den: Int32(trackTiming.timescale)), AVRational(num: 1, den: Int32(rate)))
            } else if stream.pointee.duration > 0 {
                exactFrames = av_rescale_q(stream.pointee.duration, stream.pointee.time_base, AVRational(num: 1, den: Int32(rate)))
            }
        }
        exactFrameCount = exactFrames
        // Ogg: after a seek onto the last page, libavformat (5.1) gives that page's packets the
        // seek target's timestamps instead of their own. Seeking a few pages early avoids it.
        seekPreRoll = containerName == "ogg" ? Int64(2 * rate) : 0

        // Duration: exact from the stream where the container states it, else libavformat's estimate.
        var duration: MediaTime? = nil
        var estimated = ctx.pointee.duration_estimation_method == AVFMT_DURATION_FROM_BITRATE
        if let exactFrames {
            duration = MediaTime(frame: exactFrames, sampleRate: rate)
            estimated = false
        } else if ctx.pointee.duration > 0 {
            // Some demuxers (Ogg) report the end timestamp; a stream whose timestamps start late
            // (cut from a longer one) would otherwise look longer than it is.
            var total = ctx.pointee.duration
            let containerStart = ctx.pointee.start_time
            if containerStart != FFmpeg.noPTS, containerStart > Int64(AV_TIME_BASE) / 10, containerStart < total { total -= containerStart }
            duration = MediaTime(value: total, timescale: Int32(AV_TIME_BASE))
        } else if stream.pointee.duration > 0 {
            let tb = stream.pointee.time_base
            duration = MediaTime(frame: av_rescale_q(stream.pointee.duration, tb, AVRational(num: 1, den: Int32(rate))), sampleRate: rate)
        }
        // MP3's stream duration includes the encoder delay and padding that the decoder trims:
        // report the trimmed length, exactly from the LAME tag when there is one.
        let isMP3 = codecContext!.pointee.codec_id == AV_CODEC_ID_MP3
        if isMP3, !estimated, !location.isStream, let frames = LAMEHeader.exactFrameCount(path: path, sampleRate: rate) {
            duration = MediaTime(frame: frames, sampleRate: rate)
        } else if isMP3, let d = duration, start > 0, start != FFmpeg.noPTS, !estimated {
            let delay = MediaTime(value: start * Int64(timeBase.num), timescale: timeBase.den)
            if delay < d { duration = d - delay }
        }

        // HLS: the playlist's sum of segment durations beats libavformat's guess from the first bytes.
        if let playlistDuration = hls?.duration {
            duration = playlistDuration
            estimated = false
        }

        // Opus pre-skip is counted in the stream duration but trimmed by the decoder.
        let preSkip = Int64(parameters.pointee.initial_padding)
        if !isMP4Family, preSkip > 0, let d = duration, !estimated {
            let skip = MediaTime(frame: preSkip, sampleRate: rate)
            if skip < d { duration = d - skip }
        }

        var hasArtwork = false
        for i in 0..<Int(ctx.pointee.nb_streams) {
            if let s = ctx.pointee.streams[i], s.pointee.disposition & tutti_disposition_attached_pic() != 0 { hasArtwork = true }
        }
        let bits = Int(parameters.pointee.bits_per_raw_sample)
        let containerMeta = ctx.pointee.metadata
        let streamMeta = stream.pointee.metadata
        func tag(_ key: String) -> String? { FFmpeg.dictionaryValue(containerMeta, key) ?? FFmpeg.dictionaryValue(streamMeta, key) }
        info = TrackInfo(
            input: path,
            container: containerName,
            codec: String(cString: avcodec_get_name(parameters.pointee.codec_id)),
            sampleRate: rate,
            channelCount: channels,
            bitsPerSample: bits > 0 ? bits : (parameters.pointee.bits_per_coded_sample > 0 && containerName == "wav" ? Int(parameters.pointee.bits_per_coded_sample) : nil),
            isLossy: FFmpeg.isLossy(parameters.pointee.codec_id),
            bitRate: hls?.currentBandwidth ?? (ctx.pointee.bit_rate > 0 ? Int(ctx.pointee.bit_rate) : nil),
            duration: duration,
            durationIsEstimate: estimated,
            title: tag("title"),
            artist: tag("artist") ?? tag("album_artist"),
            album: tag("album"),
            albumArtist: tag("album_artist"),
            albumPosition: AlbumPosition(track: tag("track"), disc: tag("disc")),
            hasArtwork: hasArtwork)
    }

    deinit {
        swr_free(&converter)
        av_frame_free(&frame)
        av_packet_free(&packet)
        avcodec_free_context(&codec)
        avformat_close_input(&format)
    }

    /// The track's length in frames at its sample rate, when known exactly or estimated.
    public var expectedFrameCount: Int64? {
        exactFrameCount ?? info.duration.map { $0.frame(atSampleRate: sampleRate, rounding: .toNearestOrAwayFromZero) }
    }

    /// Decodes the next block, replacing `samples` with interleaved Float32 frames
    /// (`outputChannelCount` per frame) at `sampleRate`. Returns the frame count; 0 at the end.
    /// Throws only when the input cannot be read at all; corrupt packets are skipped and counted.
    public func read(into samples: inout [Float]) throws(MediaError) -> Int {
        samples.removeAll(keepingCapacity: true)
        if let pending = pendingError {
            pendingError = nil
            throw pending
        }
        while !finished {
            let received = avcodec_receive_frame(codec, frame)
            if received == 0 {
                defer { av_frame_unref(frame) }
                do {
                    try deliver(into: &samples)
                } catch {
                    return try deferring(error, after: samples)
                }
                // A frame wholly trimmed (pre-roll, a seek's lead-in) adds nothing: go on.
                if !samples.isEmpty && samples.count >= blockFramesGoal * outputChannelCount { break }
                continue
            }
            if received == FFmpeg.eof { finished = true; break }
            if received != FFmpeg.again {
                corruptPacketCount += 1
                continue
            }
            if draining { finished = true; break }
            do {
                try feedPacket()
            } catch {
                return try deferring(error, after: samples)
            }
        }
        blockFramesGoal = min(preferredBlockFrames, max(1024, blockFramesGoal * 2))
        return samples.count / outputChannelCount
    }

    /// Frames gathered before an error are delivered first; the error comes with the next read.
    private func deferring(_ error: MediaError, after samples: [Float]) throws(MediaError) -> Int {
        if samples.isEmpty { throw error }
        pendingError = error
        return samples.count / outputChannelCount
    }

    /// Positions decoding so that the next frame delivered is `frame` (sample-accurate for
    /// codecs whose packets carry timestamps; others land on the nearest decodable frame).
    public func seek(toFrame target: Int64) throws(MediaError) {
        let from = max(0, target - seekPreRoll)
        let targetTimestamp = startTimestamp + av_rescale_q(from, AVRational(num: 1, den: Int32(sampleRate)), timeBase)
        var status = avformat_seek_file(format, streamIndex, Int64.min, targetTimestamp, targetTimestamp, 0)
        if status < 0, let stream = format?.pointee.streams[Int(streamIndex)] {
            // libavformat's binary search fails when the target lies between two adjacent indexed
            // packets (FLAC after reading to the end): start at the indexed packet before the
            // target, or the track start, instead; frames before the target are dropped below.
            let entry = av_index_search_timestamp(stream, targetTimestamp, AVSEEK_FLAG_BACKWARD)
            let fallback = entry >= 0 ? avformat_index_get_entry(stream, entry).map { $0.pointee.timestamp } ?? startTimestamp : startTimestamp
            status = avformat_seek_file(format, streamIndex, Int64.min, fallback, fallback, 0)
        }
        guard status >= 0 else {
            throw MediaError(.unsupported, input: info.input, reason: "cannot seek to \(MediaTime(frame: target, sampleRate: sampleRate).seconds) s: \(FFmpeg.message(status))")
        }
        avcodec_flush_buffers(codec)
        draining = false
        finished = false
        discardBefore = target
        needsPositionFromTimestamp = true
        position = target
        blockFramesGoal = 0
    }

    private func feedPacket() throws(MediaError) {
        while true {
            let status = av_read_frame(format, packet)
            if status < 0 {
                if let failure = customIO?.failure {
                    readError = failure.reason
                } else if status != FFmpeg.eof {
                    readError = FFmpeg.message(status)
                }
                draining = true
                avcodec_send_packet(codec, nil)
                return
            }
            defer { av_packet_unref(packet) }
            guard packet!.pointee.stream_index == streamIndex else { continue }
            let sent = avcodec_send_packet(codec, packet)
            if sent < 0 && sent != FFmpeg.again {
                corruptPacketCount += 1
                continue
            }
            return
        }
    }

    /// Converts the decoded `frame`, appending it to `samples`, and applies seek and end trimming.
    private func deliver(into samples: inout [Float]) throws(MediaError) {
        let decoded = frame!.pointee
        var frames = Int(decoded.nb_samples)
        if frames <= 0 { return }
        if needsPositionFromTimestamp {
            let pts = decoded.best_effort_timestamp
            if pts != FFmpeg.noPTS {
                position = av_rescale_q(pts - startTimestamp, timeBase, AVRational(num: 1, den: Int32(sampleRate)))
            }
            needsPositionFromTimestamp = false
        }
        var skip = 0
        if position < discardBefore {
            skip = Int(min(Int64(frames), discardBefore - position))
        }
        if let exact = exactFrameCount, position + Int64(frames) > exact {
            frames = Int(max(0, exact - position))
            if frames == 0 { finished = true; return }
        }
        let base = samples.count
        try convert(frameCount: frames, into: &samples)
        position += Int64(frames)
        if skip > 0 {
            samples.removeSubrange(base..<min(samples.count, base + skip * outputChannelCount))
        }
    }

    private func convert(frameCount: Int, into samples: inout [Float]) throws(MediaError) {
        let f = frame!
        let input = (f.pointee.format, f.pointee.ch_layout.nb_channels, f.pointee.sample_rate)
        if converterInput == nil || converterInput! != input {
            swr_free(&converter)
            var outLayout = AVChannelLayout()
            av_channel_layout_default(&outLayout, Int32(outputChannelCount))
            var inLayout = f.pointee.ch_layout
            if inLayout.order == AV_CHANNEL_ORDER_UNSPEC {
                av_channel_layout_default(&inLayout, inLayout.nb_channels)
            }
            let status = swr_alloc_set_opts2(&converter, &outLayout, AV_SAMPLE_FMT_FLT, input.2,
                                             &inLayout, AVSampleFormat(rawValue: input.0), input.2, 0, nil)
            guard status >= 0, swr_init(converter) >= 0 else {
                throw MediaError(.unsupported, input: info.input, reason: "cannot convert \(input.1)-channel audio to \(outputChannelCount) channels")
            }
            converterInput = input
        }
        let base = samples.count
        samples.append(contentsOf: repeatElement(0, count: frameCount * outputChannelCount))
        let converted = samples.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var out: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(buffer.baseAddress! + base).assumingMemoryBound(to: UInt8.self)
            return withUnsafeMutablePointer(to: &out) { outPointer in
                f.pointee.extended_data.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: Int(input.1)) { inPointer in
                    swr_convert(converter, outPointer, Int32(frameCount), inPointer, Int32(frameCount))
                }
            }
        }
        guard converted >= 0 else {
            throw MediaError(.corrupt, input: info.input, reason: "sample conversion failed: \(FFmpeg.message(converted))")
        }
        if Int(converted) < frameCount {
            samples.removeLast((frameCount - Int(converted)) * outputChannelCount)
        }
    }

    static func openError(path: String, status: Int32) -> MediaError {
        if status == tutti_averror(ENOENT) { return MediaError(.notFound, input: path, reason: "no such file") }
        if status == tutti_averror(EACCES) { return MediaError(.unreadable, input: path, reason: "permission denied") }
        if status == tutti_averror(EISDIR) { return MediaError(.unreadable, input: path, reason: "is a directory") }
        var file = stat()
        if stat(path, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_size == 0 { return MediaError(.notAudio, input: path, reason: "empty file") }
        if status == FFmpeg.eof { return MediaError(.truncated, input: path, reason: "file ends before its first audio data (truncated)") }
        return MediaError(.notAudio, input: path, reason: "not a media file FFmpeg can read (\(FFmpeg.message(status)))")
    }

    /// iTunes gapless info: " 00000000 PPPPPPPP EEEEEEEE LLLLLLLLLLLLLLLL ...", priming, padding, original length (hex).
    static func originalLength(fromITunSMPB value: String) -> Int64? {
        let fields = value.split(separator: " ")
        guard fields.count >= 4, let length = Int64(fields[3], radix: 16), length > 0 else { return nil }
        return length
    }

    static func priming(fromITunSMPB value: String) -> Int64? {
        let fields = value.split(separator: " ")
        guard fields.count >= 4, let priming = Int64(fields[1], radix: 16), priming >= 0 else { return nil }
        return priming
    }
}
