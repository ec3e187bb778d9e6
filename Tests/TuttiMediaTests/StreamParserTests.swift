import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// The formats `AudioStreamParser` takes, as test files made by the ffmpeg CLI.
enum ParserMedia: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case mp3, adts, flac, opus, vorbis, wav

    var fileExtension: String {
        switch self {
        case .mp3: "mp3"
        case .adts: "aac"
        case .flac: "flac"
        case .opus: "opus"
        case .vorbis: "ogg"
        case .wav: "wav"
        }
    }

    var codecArguments: [String] {
        switch self {
        case .mp3: ["-c:a", "libmp3lame", "-b:a", "192k"]
        case .adts: ["-c:a", "aac", "-b:a", "128k", "-f", "adts"]
        case .flac: ["-c:a", "flac"]
        case .opus: ["-c:a", "libopus", "-b:a", "96k"]
        case .vorbis: ["-c:a", "libvorbis", "-q:a", "4"]
        case .wav: ["-c:a", "pcm_s16le"]
        }
    }

    var container: StreamFormatHint {
        switch self {
        case .mp3: .mp3
        case .adts: .adts
        case .flac: .flac
        case .opus, .vorbis: .ogg
        case .wav: .wav
        }
    }

    var isLossless: Bool { self == .flac || self == .wav }

    var testDescription: String { rawValue }

    /// A 1 s stereo tone file in this format (MP3 with the ID3v2 tag ffmpeg writes).
    func make(in directory: TemporaryDirectory, seconds: Double = 1) throws -> String {
        let path = directory.file("tone-\(rawValue).\(fileExtension)")
        try TestMedia.generateTone(path, seconds: seconds, codecArguments: codecArguments)
        return path
    }
}

/// Feeds `bytes` to a new parser in chunks of `chunkSize()` bytes, then finishes.
func parseStream(_ bytes: [UInt8], hint: StreamFormatHint? = nil, chunkSize: () -> Int) throws(MediaError) -> [ParsedEvent] {
    let parser = AudioStreamParser(format: hint)
    var events: [ParsedEvent] = []
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + max(1, chunkSize()))
        let result = bytes.withUnsafeBytes { all in
            Result { () throws(MediaError) -> [ParsedEvent] in
                try parser.push(UnsafeRawBufferPointer(rebasing: all[offset..<end]))
            }
        }
        events += try result.get()
        offset = end
    }
    events += try parser.finish()
    return events
}

func readBytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

extension [ParsedEvent] {
    var descriptions: [StreamDescription] { compactMap { if case .format(let d) = $0 { d } else { nil } } }
    var packets: [StreamPacket] { compactMap { if case .packet(let p) = $0 { p } else { nil } } }
}

/// ffprobe's packet sizes for the audio stream of `path`.
func ffprobePacketSizes(_ path: String) throws -> [Int] {
    let out = try TestMedia.run("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=size", "-of", "csv=p=0", path])
    // Packets with side data (skip samples at the start, end trimming) print it on extra lines
    // and after a comma: keep the first field of lines that start with a number.
    return String(decoding: out, as: UTF8.self).split(whereSeparator: \.isNewline).compactMap {
        $0.split(separator: ",", omittingEmptySubsequences: false).first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
}

/// ffprobe's sample rate and channel count for the audio stream of `path`.
func ffprobeFormat(_ path: String) throws -> (rate: Int, channels: Int) {
    let out = try TestMedia.run("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "stream=sample_rate,channels", "-of", "csv=p=0", path])
    let fields = String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Int($0) }
    return (fields[0], fields[1])
}

@Suite("StreamParserTests")
struct StreamParserTests {
    @Test("any chunking gives the same events", arguments: ParserMedia.allCases)
    func chunkingIsIrrelevant(_ media: ParserMedia) throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        let bytes = try readBytes(media.make(in: directory))
        let whole = try parseStream(bytes) { bytes.count }
        #expect(whole.descriptions.count == 1)
        #expect(whole.packets.count >= 8)  // FLAC: 4608-frame blocks
        if case .format = whole.first {} else { Issue.record("first event is not the format") }
        #expect(try parseStream(bytes) { 1 } == whole)
        #expect(try parseStream(bytes) { 7 } == whole)
        var generator = SeededGenerator(seed: 0x5EED_0000 + UInt64(media.rawValue.count))
        #expect(try parseStream(bytes) { Int.random(in: 1...5000, using: &generator) } == whole)
        // The hint gives the same events as sniffing.
        #expect(try parseStream(bytes, hint: media.container) { 4096 } == whole)
        // Timestamps run from packet to packet.
        let packets = whole.packets
        for (a, b) in zip(packets, packets.dropFirst()) {
            if let ta = a.timestamp, let tb = b.timestamp, let d = a.frameCount { #expect(tb == ta + Int64(d)) }
        }
        #expect(packets.allSatisfy { $0.frameCount != nil && $0.timestamp != nil })
    }

    @Test("packets agree with ffprobe's", arguments: ParserMedia.allCases)
    func packetsMatchFFprobe(_ media: ParserMedia) throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        let path = try media.make(in: directory)
        let events = try parseStream(try readBytes(path)) { 1000 }
        let sizes = events.packets.map(\.bytes.count)
        let probed = try ffprobePacketSizes(path)
        if media == .wav {
            // libavformat cuts PCM into packets of its own size (about 1/10 s, a power of two);
            // the parser cuts 4096 frames. The data is the same: compare the total bytes.
            #expect(sizes.reduce(0, +) == probed.reduce(0, +))
            #expect(sizes.dropLast().allSatisfy { $0 == AudioStreamParser.pcmPacketFrames * 4 })
        } else {
            // MP3: libavformat also leaves out the Xing/LAME info frame. Ogg: ffprobe lists only
            // audio packets; the header packets (OpusHead/OpusTags, the three Vorbis headers)
            // go to the decoder's extradata, as they do to `decoderConfiguration` here.
            #expect(sizes == probed)
        }
    }

    @Test("the description matches the file", arguments: ParserMedia.allCases)
    func descriptionMatchesFile(_ media: ParserMedia) throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        let path = try media.make(in: directory)
        let events = try parseStream(try readBytes(path)) { 3000 }
        let description = try #require(events.descriptions.first)
        let probed = try ffprobeFormat(path)
        #expect(description.sampleRate == probed.rate)
        #expect(description.channelCount == probed.channels)
        #expect(description.container == media.container)
        switch media {
        case .flac: #expect(description.decoderConfiguration.count == 34)
        case .opus: #expect(description.headerPackets.count == 2 && description.decoderConfiguration == description.headerPackets[0])
        case .vorbis: #expect(description.headerPackets.count == 3)
        case .mp3: #expect(description.encoderDelay != nil && description.encoderPadding != nil)
        case .adts, .wav: break
        }
    }

    @Test("decoding the packets gives the file's samples", arguments: ParserMedia.allCases)
    func decodedLengthMatches(_ media: ParserMedia) throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        let path = try media.make(in: directory)
        let events = try parseStream(try readBytes(path)) { 2048 }
        let description = try #require(events.descriptions.first)
        let decoder = try ParsedPacketDecoder(description)
        for packet in events.packets { decoder.decode(packet.bytes) }
        decoder.finish()
        #expect(decoder.rejectedPacketCount == 0)
        let (file, _) = try decodeWithTutti(path)
        let fileFrames = Int64(file.frameCount)
        let packetFrames = events.packets.reduce(Int64(0)) { $0 + Int64($1.frameCount ?? 0) }
        if media.isLossless {
            #expect(decoder.frameCount == fileFrames)
            #expect(packetFrames == fileFrames)
        } else {
            // The file decode is gapless: FFmpeg trims the encoder delay and padding (LAME tag,
            // Opus pre-skip and end granule, Vorbis end granule, AAC's 1024 priming frames that
            // ADTS cannot state) which a raw packet decode keeps. So the raw decode is longer by
            // at most about two packets, and for MP3 exactly by the LAME tag's delay + padding.
            let extra = decoder.frameCount - fileFrames
            #expect(extra >= 0 && extra <= 2 * 2048, "raw \(decoder.frameCount) vs file \(fileFrames)")
            if media == .mp3 {
                #expect(packetFrames - Int64(description.encoderDelay ?? 0) - Int64(description.encoderPadding ?? 0) == fileFrames)
            }
        }
    }

    @Test("garbage is not audio, and the error is final")
    func garbage() throws {
        var generator = SeededGenerator(seed: 42)
        let noise = (0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let parser = AudioStreamParser()
        var caught: MediaError?
        do {
            var offset = 0
            while offset < noise.count {
                _ = try parser.push(Array(noise[offset..<min(noise.count, offset + 1000)]))
                offset += 1000
            }
            _ = try parser.finish()
        } catch { caught = error }
        let error = try #require(caught)
        #expect(error.kind == .notAudio)
        #expect(error.reason == "not an audio stream (no MP3, ADTS, FLAC, Ogg or WAV signature in the first 64 KiB)")
        #expect(throws: error) { try parser.push([1, 2, 3]) }
        #expect(throws: error) { try parser.finish() }

        let text = Array(String(repeating: "hello, this is not audio\n", count: 10).utf8)
        #expect { try parseStream(text) { 5 } } throws: { ($0 as? MediaError)?.kind == .notAudio }
        #expect { try parseStream([]) { 1 } } throws: { ($0 as? MediaError)?.kind == .notAudio }
        // A hint that does not fit the bytes.
        #expect { try parseStream(text, hint: .wav) { 5 } } throws: { ($0 as? MediaError)?.reason.contains("RIFF") == true }
        #expect { try parseStream(text, hint: .flac) { 5 } } throws: { ($0 as? MediaError)?.reason.contains("fLaC") == true }
    }

    @Test("a truncated stream ends cleanly with the complete packets", arguments: ParserMedia.allCases)
    func truncated(_ media: ParserMedia) throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        // 3 s: ffmpeg's Ogg pages hold up to 1 s, and the Vorbis header pages are several KiB.
        let bytes = try readBytes(media.make(in: directory, seconds: 3))
        let full = try parseStream(bytes) { bytes.count }
        let cut = Array(bytes[0..<(bytes.count * 3 / 4 + 3)])
        for chunk in [1, 7, cut.count] {
            let events = try parseStream(cut) { chunk }
            #expect(events.descriptions == full.descriptions)
            let packets = events.packets
            #expect(packets.count > 1 && packets.count < full.packets.count)
            if media == .wav {
                // The last PCM packet is whatever whole frames remain.
                #expect(Array(full.packets.prefix(packets.count - 1)) == Array(packets.dropLast()))
            } else {
                #expect(Array(full.packets.prefix(packets.count)) == packets)
            }
        }
        // Cut inside the header: no description, a clear error.
        let headerOnly = Array(bytes.prefix(media == .mp3 ? 5 : 20))
        #expect { try parseStream(headerOnly) { 1 } } throws: { error in
            let kind = (error as? MediaError)?.kind
            return kind == .truncated || kind == .notAudio
        }
    }

    @Test("a corrupt Ogg page is a checksum mismatch")
    func oggChecksum() throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        var bytes = try readBytes(ParserMedia.vorbis.make(in: directory))
        bytes[bytes.count / 2] ^= 0x55
        #expect { try parseStream(bytes) { 7 } } throws: { error in
            (error as? MediaError)?.reason.hasPrefix("Ogg page checksum mismatch") == true
        }
    }

    @Test("a WAV written to a pipe (unknown data size)")
    func pipedWAV() throws {
        let data = try TestMedia.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
                                               "sine=frequency=440:sample_rate=48000:duration=0.5", "-ac", "2",
                                               "-c:a", "pcm_s16le", "-f", "wav", "-"])
        let bytes = [UInt8](data)
        let events = try parseStream(bytes) { 333 }
        let description = try #require(events.descriptions.first)
        #expect(description.sampleRate == 48000 && description.channelCount == 2)
        #expect(events.packets.reduce(0) { $0 + ($1.frameCount ?? 0) } == 24000)
    }

    @Test("an MP3 without ID3 tag and with garbage before it")
    func mp3WithLeadingGarbage() throws {
        let directory = try TemporaryDirectory("stream-parser")
        defer { directory.remove() }
        let path = directory.file("plain.mp3")
        try TestMedia.generateTone(path, seconds: 1, codecArguments: ["-c:a", "libmp3lame", "-id3v2_version", "0", "-write_xing", "0"])
        let bytes = try readBytes(path)
        let reference = try parseStream(bytes) { bytes.count }
        let events = try parseStream(Array(repeating: 0x20, count: 500) + bytes) { 11 }
        #expect(events == reference)
        #expect(events.packets.count == (try ffprobePacketSizes(path)).count)
    }
}
