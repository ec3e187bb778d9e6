import CFFmpeg
import Synchronization
import TuttiCore

/// Reads what a library needs to know of a file (format, duration, tags, whether it has
/// embedded artwork) from its headers alone, the way MPD's database update does: no decoder is
/// opened and no audio is decoded, unless the headers leave the format or the length unknown
/// (raw AAC, an MP3 without a Xing header), when libavformat reads a few packets to estimate
/// them, as `AudioFileDecoder` always does.
///
/// For playback, `AudioFileDecoder.info` stays the truth: it is exact where this may estimate.
/// Thread-safety: any thread; each call opens its own demuxer.
public enum TrackProbe {
    public static func read(path: String) throws(MediaError) -> TrackInfo {
        // The demuxer its extension names first: probing every demuxer against the file's first
        // bytes took a third of a scan. A file misnamed is probed after all.
        var context: UnsafeMutablePointer<AVFormatContext>?
        var status: Int32 = -1
        if let demuxer = demuxer(forExtensionOf: path) {
            context = avformat_alloc_context()
            status = avformat_open_input(&context, path, demuxer, nil)
        }
        if status < 0 {
            context = avformat_alloc_context()
            // A tag block in the first 64 KiB is enough for every library format; the default
            // 5 MB probe would read most of a track.
            context?.pointee.probesize = 64 * 1024
            status = avformat_open_input(&context, path, nil, nil)
        }
        guard status >= 0, let format = context else { throw AudioFileDecoder.openError(path: path, status: status) }
        defer { avformat_close_input(&context) }

        var index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        if index < 0 || !headersSuffice(format, stream: format.pointee.streams[Int(index)]!) {
            let infoStatus = avformat_find_stream_info(format, nil)
            index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
            guard index >= 0 else {
                let name = String(cString: format.pointee.iformat.pointee.name)
                throw MediaError(.notAudio, input: path, reason: infoStatus < 0
                    ? "not an audio file (\(FFmpeg.message(infoStatus)))" : "no audio stream (container \(name))")
            }
        }
        let stream = format.pointee.streams[Int(index)]!
        let parameters = stream.pointee.codecpar!
        let rate = Int(parameters.pointee.sample_rate)
        let channels = Int(parameters.pointee.ch_layout.nb_channels)
        guard rate > 0, channels > 0 else {
            throw MediaError(.unsupported, input: path, reason: "audio stream of unknown format (\(String(cString: avcodec_get_name(parameters.pointee.codec_id))))")
        }
        guard hasDecoder(parameters.pointee.codec_id) else {
            throw MediaError(.unsupported, input: path, reason: "no decoder for codec \(String(cString: avcodec_get_name(parameters.pointee.codec_id)))")
        }
        var hasArtwork = false
        for i in 0..<Int(format.pointee.nb_streams) where format.pointee.streams[i]!.pointee.disposition & tutti_disposition_attached_pic() != 0 {
            hasArtwork = true
        }
        let containerName = String(cString: format.pointee.iformat.pointee.name)
        func tag(_ key: String) -> String? {
            FFmpeg.dictionaryValue(format.pointee.metadata, key) ?? FFmpeg.dictionaryValue(stream.pointee.metadata, key)
        }
        let bits = Int(parameters.pointee.bits_per_raw_sample)
        let duration = Self.duration(format, stream: stream, rate: rate)
        var info = TrackInfo(
            input: path,
            container: containerName,
            codec: String(cString: avcodec_get_name(parameters.pointee.codec_id)),
            sampleRate: rate,
            channelCount: channels,
            bitsPerSample: bits > 0 ? bits : nil,
            isLossy: FFmpeg.isLossy(parameters.pointee.codec_id),
            bitRate: format.pointee.bit_rate > 0 ? Int(format.pointee.bit_rate) : nil,
            duration: duration?.time,
            durationIsEstimate: duration?.estimated ?? true,
            title: tag("title"),
            artist: tag("artist") ?? tag("album_artist"),
            album: tag("album"),
            albumArtist: tag("album_artist"),
            albumPosition: AlbumPosition(track: tag("track"), disc: tag("disc")),
            hasArtwork: hasArtwork)
        info.loudnessTags = LoudnessTags(tag: tag)
        return info
    }

    /// libavformat's demuxer for a file name's extension; nil for others (probed).
    private static func demuxer(forExtensionOf path: String) -> UnsafePointer<AVInputFormat>? {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return nil }
        let name: String
        switch path[path.index(after: dot)...].lowercased() {
        case "flac": name = "flac"
        case "mp3": name = "mp3"
        case "ogg", "oga", "opus": name = "ogg"
        case "m4a", "mp4", "alac": name = "mov,mp4,m4a,3gp,3g2,mj2"
        case "wav": name = "wav"
        case "aif", "aiff": name = "aiff"
        case "wv": name = "wv"
        case "ape": name = "ape"
        case "mka", "webm": name = "matroska,webm"
        case "aac": name = "aac"
        default: return nil
        }
        return demuxers.withLock { cache in
            if let known = cache[name] { return known }
            let found = av_find_input_format(name)
            cache[name] = found
            return found
        }
    }

    /// Whether FFmpeg decodes `codec`: asked once per codec (the lookup walks every codec).
    private static func hasDecoder(_ codec: AVCodecID) -> Bool {
        decoders.withLock { cache in
            if let known = cache[codec.rawValue] { return known }
            let found = avcodec_find_decoder(codec) != nil
            cache[codec.rawValue] = found
            return found
        }
    }

    // FFmpeg's demuxer and codec tables are static data: their pointers never change.
    private static let demuxers = Mutex<[String: UnsafePointer<AVInputFormat>?]>([:])
    private static let decoders = Mutex<[UInt32: Bool]>([:])

    /// The headers gave a sample rate, channels and a length.
    private static func headersSuffice(_ format: UnsafeMutablePointer<AVFormatContext>, stream: UnsafeMutablePointer<AVStream>) -> Bool {
        let parameters = stream.pointee.codecpar!.pointee
        return parameters.sample_rate > 0 && parameters.ch_layout.nb_channels > 0
            && (stream.pointee.duration > 0 || format.pointee.duration > 0)
    }

    private static func duration(_ format: UnsafeMutablePointer<AVFormatContext>, stream: UnsafeMutablePointer<AVStream>, rate: Int) -> (time: MediaTime, estimated: Bool)? {
        let estimated = format.pointee.duration_estimation_method == AVFMT_DURATION_FROM_BITRATE
        if stream.pointee.duration > 0 {
            let frames = av_rescale_q(stream.pointee.duration, stream.pointee.time_base, AVRational(num: 1, den: Int32(rate)))
            return (MediaTime(frame: frames, sampleRate: rate), estimated)
        }
        if format.pointee.duration > 0 {
            return (MediaTime(value: format.pointee.duration, timescale: Int32(AV_TIME_BASE)), estimated)
        }
        return nil
    }
}
