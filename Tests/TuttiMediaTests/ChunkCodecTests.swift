import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// The network stream codec: chunks of Float32 encoded into self-contained packets
/// (`ChunkEncoder`) and decoded back (`ChunkDecoder`), for FLAC (24-bit lossless) and raw f32.
@Suite struct ChunkCodecTests {
    static let rate = 48000

    // MARK: - Test material

    /// Music-like stereo made by the ffmpeg CLI: plucked notes with decaying harmonics and a
    /// vibrato voice (different per channel, no short period), over a pink-noise floor at
    /// `noise` amplitude, encoded with `codecArguments` (e.g. float or 16-bit WAV).
    static func makeMusic(_ path: String, seconds: Double, noise: Double, codecArguments: [String]) throws {
        let left = "0.3*sin(2*PI*220*t)*exp(-4*mod(t,0.5))+0.15*sin(2*PI*440.7*t)*exp(-6*mod(t,0.5))"
            + "+0.05*sin(2*PI*1321*t)*exp(-9*mod(t,0.25))+0.12*sin(2*PI*330*t+2*sin(2*PI*5.3*t))"
        let right = "0.28*sin(2*PI*277.2*t)*exp(-3*mod(t+0.25,0.5))+0.15*sin(2*PI*554.4*t+1)*exp(-5*mod(t+0.25,0.5))"
            + "+0.1*sin(2*PI*415.3*t)*(0.5+0.5*sin(2*PI*0.7*t))+0.04*sin(2*PI*(1800*t+90*t*t))"
        let duration = "\(seconds)"
        try TestMedia.ffmpeg([
            "-f", "lavfi", "-i", "aevalsrc=exprs='\(left)|\(right)':s=\(rate):d=\(duration)",
            "-f", "lavfi", "-i", "anoisesrc=c=pink:a=\(noise):seed=11:r=\(rate):d=\(duration)",
            "-f", "lavfi", "-i", "anoisesrc=c=pink:a=\(noise):seed=23:r=\(rate):d=\(duration)",
            "-filter_complex", "[1][2]join=inputs=2:channel_layout=stereo[n];[0][n]amix=inputs=2:normalize=0[a]",
            "-map", "[a]",
        ] + codecArguments + [path])
    }

    /// The music as Tutti's pipeline has it: decoded to Float32 by `AudioFileDecoder`.
    static func music(seconds: Double = 3, noise: Double = 0.0003, codecArguments: [String] = ["-c:a", "pcm_f32le"]) throws -> [Float] {
        let dir = try TemporaryDirectory("tutti-codec")
        defer { dir.remove() }
        let path = dir.file("music.wav")
        try makeMusic(path, seconds: seconds, noise: noise, codecArguments: codecArguments)
        let decoder = try AudioFileDecoder(path: path)
        try #require(decoder.sampleRate == rate && decoder.outputChannelCount == 2)
        let samples = try readToEnd(decoder).samples
        try #require(samples.count == Int(seconds * Double(rate)) * 2)
        try #require(SignalCheck.rms(samples, channels: 2, frames: 0..<samples.count / 2) > 0.05)
        return samples
    }

    /// What a chunk kept at `bits` significant bits must decode to: the nearest multiple of
    /// 2^(1 - bits) (ties to even), clipped to [-1, 1 - 2^(1 - bits)], NaN as 0.
    static func quantized(_ x: Float, bits: Int) -> Float {
        if x.isNaN { return 0 }
        let scale = Double(1 << (bits - 1))
        let scaled = (Double(x) * scale).rounded(.toNearestOrEven)
        return Float(min(max(scaled, -scale), scale - 1) / scale)
    }

    /// What FLAC must return for `x`: the nearest multiple of 2⁻²³ (ties to even), clipped to
    /// [-1, 1 - 2⁻²³], NaN as 0. Computed in Double, independently of the encoder.
    static func quantized24(_ x: Float) -> Float {
        if x.isNaN { return 0 }
        let scaled = (Double(x) * 8_388_608).rounded(.toNearestOrEven)
        return Float(min(max(scaled, -8_388_608), 8_388_607) / 8_388_608)
    }

    struct Chunk {
        var firstFrame: Int
        var frames: Int
        var packet: [UInt8]
    }

    /// Cuts `samples` into chunks of `sizes` (cycled; the last chunk is what remains) and encodes each.
    static func encode(_ samples: [Float], channels: Int, sizes: [Int], significantBits: Int = ChunkEncoder.streamBits,
                       with encoder: ChunkEncoder) throws -> [Chunk] {
        let total = samples.count / channels
        var chunks = [Chunk]()
        var frame = 0
        var index = 0
        try samples.withUnsafeBufferPointer { buffer in
            while frame < total {
                let frames = min(sizes[index % sizes.count], total - frame)
                let packet = try encoder.encode(buffer.baseAddress! + frame * channels, frames: frames, significantBits: significantBits)
                chunks.append(Chunk(firstFrame: frame, frames: frames, packet: packet))
                frame += frames
                index += 1
            }
        }
        return chunks
    }

    static func slice(_ samples: [Float], _ chunk: Chunk, channels: Int) -> [Float] {
        Array(samples[(chunk.firstFrame * channels)..<((chunk.firstFrame + chunk.frames) * channels)])
    }

    // MARK: - FLAC round trip

    /// Real signal through FLAC chunks of each size: every chunk decodes to exactly its frames,
    /// and the whole equals the input quantized to 24 bits.
    @Test(arguments: [2048, 480, 1, 16384])
    func flacRoundTripEqualsInputQuantizedTo24Bits(_ size: Int) throws {
        var input = try Self.music()
        if size == 1 { input = Array(input.prefix(2400 * 2)) }  // one packet per frame: keep it short
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let decoder = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        let chunks = try Self.encode(input, channels: 2, sizes: [size], with: encoder)
        #expect(chunks.count == (input.count / 2 + size - 1) / size)

        var output = [Float]()
        var block = [Float]()
        for chunk in chunks {
            let frames = try decoder.decode(chunk.packet, into: &block)
            #expect(frames == chunk.frames)
            #expect(block.count == chunk.frames * 2)
            output.append(contentsOf: block)
        }
        try #require(output.count == input.count)
        let expected = input.map(Self.quantized24)
        #expect(output == expected, "decoded FLAC differs from the 24-bit quantized input")
        #expect(maxDifferenceSameLength(output, input) <= 1.0 / 8_388_608)
        #expect(output != input, "a float source should need quantizing (else the test proves nothing)")
    }

    /// A chunk kept at fewer bits (a 16-bit source's) decodes to the input rounded to them, in
    /// a stream that stays 24-bit, and costs what that depth costs: FLAC shifts out the zero
    /// low bits. Mixed depths follow each other in one stream.
    @Test(arguments: [16, 20, 8])
    func flacChunksKeepTheirSignificantBits(_ bits: Int) throws {
        let input = try Self.music(seconds: 2)
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let decoder = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        let reduced = try Self.encode(input, channels: 2, sizes: [2048], significantBits: bits, with: encoder)
        let full = try Self.encode(input, channels: 2, sizes: [2048], with: encoder)
        var block = [Float]()
        for (index, chunk) in reduced.enumerated() {
            // Alternate depths within the stream: each chunk decodes at its own.
            let (packet, depth) = index % 2 == 0 ? (chunk.packet, bits) : (full[index].packet, 24)
            #expect(try decoder.decode(packet, into: &block) == chunk.frames)
            #expect(block == Self.slice(input, chunk, channels: 2).map { Self.quantized($0, bits: depth) },
                    "chunk at \(chunk.firstFrame) kept at \(depth) bits")
        }
        // The low bits of a signal over a noise floor are noise, which FLAC cannot predict: each
        // one dropped saves about a bit per sample (at least half of one here, at 8 bits too).
        let reducedBytes = reduced.reduce(0) { $0 + $1.packet.count }, fullBytes = full.reduce(0) { $0 + $1.packet.count }
        let savedBitsPerSample = Double(fullBytes - reducedBytes) * 8 / Double(input.count)
        print("ChunkCodecTests \(bits) significant bits save \(savedBitsPerSample) bits per sample")
        #expect(savedBitsPerSample > Double(24 - bits) * 0.5, "\(bits) bits: \(reducedBytes) bytes, 24 bits: \(fullBytes)")
        input.withUnsafeBufferPointer { buffer in
            for invalid in [7, 25] {
                #expect(throws: MediaError.self) { _ = try encoder.encode(buffer.baseAddress!, frames: 16, significantBits: invalid) }
            }
        }
    }

    /// Chunk sizes changing from chunk to chunk (below FLAC's minimum 16, odd, the maximum),
    /// more distinct sizes than the encoder keeps contexts for.
    @Test func flacMixedChunkSizes() throws {
        let input = try Self.music(seconds: 2)
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let decoder = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        let sizes = [2048, 15, 2048, 1, 16, 17, 16384, 480, 2047, 2049, 4096, 3, 1000, 2048]
        let chunks = try Self.encode(input, channels: 2, sizes: sizes, with: encoder)
        var block = [Float]()
        for chunk in chunks {
            #expect(try decoder.decode(chunk.packet, into: &block) == chunk.frames)
            #expect(block == Self.slice(input, chunk, channels: 2).map(Self.quantized24), "chunk at \(chunk.firstFrame) of \(chunk.frames)")
        }
    }

    /// Mono and 8 channels, out-of-range values, infinities and NaN (clipped, NaN → 0), silence.
    @Test(arguments: [1, 8])
    func flacChannelCountsAndClipping(_ channels: Int) throws {
        var generator = SeededGenerator(seed: UInt64(channels))
        let frames = 3000
        var input = (0..<(frames * channels)).map { _ in Float.random(in: -1.2...1.2, using: &generator) }
        let specials: [Float] = [1, -1, 1.0000001, -1.0000001, 0.99999994, .infinity, -.infinity, .nan, -0.0,
                                 .leastNonzeroMagnitude, 0.5 / 8_388_608, 1.5 / 8_388_608, -0.5 / 8_388_608]
        for (i, value) in specials.enumerated() { input[i * 7] = value }
        for i in (frames / 2 * channels)..<(frames / 2 * channels + 600 * channels) { input[i] = 0 }

        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: channels)
        let decoder = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: channels, codecHeader: encoder.codecHeader)
        var block = [Float]()
        for chunk in try Self.encode(input, channels: channels, sizes: [1024, 7], with: encoder) {
            #expect(try decoder.decode(chunk.packet, into: &block) == chunk.frames)
            #expect(block == Self.slice(input, chunk, channels: channels).map(Self.quantized24))
        }
    }

    // MARK: - Independence

    /// Each chunk decodes alone: a fresh decoder given chunk 5 before chunk 2 (and then all
    /// chunks shuffled) returns what a sequential decode returns; a fresh encoder given only
    /// chunk 5's samples makes a packet that decodes to the same.
    @Test func chunksDecodeIndependentlyInAnyOrder() throws {
        let input = try Self.music(seconds: 2)
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let chunks = try Self.encode(input, channels: 2, sizes: [2048], with: encoder)
        try #require(chunks.count > 10)

        let sequential = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        var reference = [[Float]]()
        var block = [Float]()
        for chunk in chunks {
            _ = try sequential.decode(chunk.packet, into: &block)
            reference.append(block)
        }

        let fresh = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        #expect(try fresh.decode(chunks[5].packet, into: &block) == 2048)
        #expect(block == reference[5])
        #expect(try fresh.decode(chunks[2].packet, into: &block) == 2048)
        #expect(block == reference[2])

        var generator = SeededGenerator(seed: 5)
        for index in chunks.indices.shuffled(using: &generator) {
            _ = try fresh.decode(chunks[index].packet, into: &block)
            #expect(block == reference[index], "chunk \(index) out of order")
        }

        // Nothing of earlier chunks is inside a packet: a fresh encoder makes the same audio.
        let alone = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let samples = Self.slice(input, chunks[5], channels: 2)
        let packet = try samples.withUnsafeBufferPointer { try alone.encode($0.baseAddress!, frames: 2048) }
        #expect(try fresh.decode(packet, into: &block) == 2048)
        #expect(block == reference[5])
        // The header is the same for every encoder of the format.
        #expect(alone.codecHeader == encoder.codecHeader)
    }

    /// The packets of one chunk size are standard FLAC frames: written after "fLaC" and the
    /// codec header, they make a file the ffmpeg CLI decodes to the same samples.
    @Test func packetsFormAFileTheFFmpegCLIDecodes() throws {
        let input = try Self.music(seconds: 1.024)  // 24 chunks of 2048
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let chunks = try Self.encode(input, channels: 2, sizes: [2048], with: encoder)
        #expect(encoder.codecHeader.count == 34)
        var file = Array("fLaC".utf8) + [0x80, 0, 0, 34] + encoder.codecHeader
        for chunk in chunks { file += chunk.packet }
        let dir = try TemporaryDirectory("tutti-codec")
        defer { dir.remove() }
        let path = dir.file("chunks.flac")
        try Data(file).write(to: URL(fileURLWithPath: path))
        let cli = try TestMedia.decodeWithFFmpeg(path)
        #expect(cli.count == input.count)
        #expect(cli == input.map(Self.quantized24))
    }

    // MARK: - PCM

    /// f32le is bit-exact for every bit pattern, 4 bytes per sample, no header.
    @Test func pcmIsBitExact() throws {
        var generator = SeededGenerator(seed: 3)
        let channels = 2
        var input = (0..<(5000 * channels)).map { _ in Float(bitPattern: UInt32(truncatingIfNeeded: generator.next())) }
        input[0] = -0.0
        input[1] = .nan
        input[2] = Float(bitPattern: 0x7FA0_0001)  // signalling NaN payload
        let encoder = try ChunkEncoder(codec: .pcm, sampleRate: Self.rate, channelCount: channels)
        #expect(encoder.codecHeader.isEmpty)
        let decoder = try ChunkDecoder(codec: .pcm, sampleRate: Self.rate, channelCount: channels, codecHeader: [])
        var block = [Float]()
        for chunk in try Self.encode(input, channels: channels, sizes: [2048, 1, 16384, 480], with: encoder) {
            #expect(chunk.packet.count == chunk.frames * channels * 4)
            let first = Self.slice(input, chunk, channels: channels)
            #expect(Array(chunk.packet.prefix(4)) == withUnsafeBytes(of: first[0].bitPattern.littleEndian, Array.init))
            #expect(try decoder.decode(chunk.packet, into: &block) == chunk.frames)
            #expect(block.map(\.bitPattern) == first.map(\.bitPattern))
        }
    }

    // MARK: - Bad packets

    private func expectCorrupt(_ decoder: ChunkDecoder, _ packet: [UInt8], mentions: String? = nil,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        var block: [Float] = [1, 2, 3]
        let error = #expect(throws: MediaError.self, sourceLocation: sourceLocation) {
            _ = try decoder.decode(packet, into: &block)
        }
        guard let error else { return }
        #expect(error.kind == .corrupt, sourceLocation: sourceLocation)
        #expect(!error.description.contains("\n"), "one line", sourceLocation: sourceLocation)
        #expect(error.description.hasPrefix("\(decoder.codec.wireName) stream: "), sourceLocation: sourceLocation)
        if let mentions { #expect(error.reason.contains(mentions), "\(error)", sourceLocation: sourceLocation) }
        #expect(block.isEmpty, sourceLocation: sourceLocation)
    }

    /// A corrupt, truncated, empty or foreign packet gives a one-line MediaError, and the
    /// decoder goes on with the next good packet.
    @Test func corruptPacketsThrowAndDecodingGoesOn() throws {
        let input = try Self.music(seconds: 1)
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let chunks = try Self.encode(input, channels: 2, sizes: [2048], with: encoder)
        let decoder = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: encoder.codecHeader)
        let good = chunks[3].packet
        let expected = Self.slice(input, chunks[3], channels: 2).map(Self.quantized24)
        var block = [Float]()
        func nextGoodPacketDecodes(sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                #expect(try decoder.decode(good, into: &block) == 2048, sourceLocation: sourceLocation)
            } catch {
                Issue.record("the good packet after a bad one failed: \(error)", sourceLocation: sourceLocation)
            }
            #expect(block == expected, sourceLocation: sourceLocation)
        }
        nextGoodPacketDecodes()

        expectCorrupt(decoder, Array(good.prefix(good.count - 100)), mentions: "CRC mismatch")
        nextGoodPacketDecodes()
        expectCorrupt(decoder, Array(good.prefix(good.count / 2)), mentions: "truncated")
        nextGoodPacketDecodes()
        expectCorrupt(decoder, Array(good.prefix(6)))
        nextGoodPacketDecodes()
        for position in [good.count / 2, 20, good.count - 1, 3] {  // residual, subframe header, CRC, frame header
            var flipped = good
            flipped[position] ^= 0x10
            expectCorrupt(decoder, flipped)
            nextGoodPacketDecodes()
        }
        expectCorrupt(decoder, [], mentions: "empty packet")
        nextGoodPacketDecodes()
        var generator = SeededGenerator(seed: 9)
        expectCorrupt(decoder, (0..<3000).map { _ in UInt8.random(in: 0...255, using: &generator) }, mentions: "does not start with a FLAC frame")
        nextGoodPacketDecodes()
        expectCorrupt(decoder, good + good, mentions: "more than one FLAC frame")
        nextGoodPacketDecodes()

        // A valid packet of another format: mono.
        let mono = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 1)
        let monoPacket = try [Float](repeating: 0.25, count: 512).withUnsafeBufferPointer { try mono.encode($0.baseAddress!, frames: 512) }
        expectCorrupt(decoder, monoPacket, mentions: "packet has 1 channel, stream has 2")
        nextGoodPacketDecodes()

        // PCM: a packet that is not whole frames.
        let pcm = try ChunkDecoder(codec: .pcm, sampleRate: Self.rate, channelCount: 2, codecHeader: [])
        expectCorrupt(pcm, [UInt8](repeating: 0, count: 8 * 100 + 3), mentions: "not a whole number")
        expectCorrupt(pcm, [], mentions: "empty packet")
        #expect(try pcm.decode([UInt8](repeating: 0, count: 8 * 100), into: &block) == 100)
    }

    /// Arguments outside what the codec carries fail at once with `invalidArgument`.
    @Test func invalidArguments() throws {
        #expect(StreamCodec(wireName: "flac") == .flac)
        #expect(StreamCodec(wireName: "pcm-f32le") == .pcm)
        #expect(StreamCodec(wireName: "opus") == nil)
        for codec in StreamCodec.allCases { #expect(StreamCodec(wireName: codec.wireName) == codec) }

        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let samples = [Float](repeating: 0, count: 2 * (StreamCodec.maximumChunkFrames + 1))
        for frames in [0, -1, StreamCodec.maximumChunkFrames + 1] {
            let error = #expect(throws: MediaError.self) {
                _ = try samples.withUnsafeBufferPointer { try encoder.encode($0.baseAddress!, frames: frames) }
            }
            #expect(error?.kind == .invalidArgument)
        }
        #expect(throws: MediaError.self) { _ = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 9) }
        #expect(throws: MediaError.self) { _ = try ChunkEncoder(codec: .pcm, sampleRate: 0, channelCount: 2) }
        #expect(throws: MediaError.self) { _ = try ChunkEncoder(codec: .flac, sampleRate: 1_000_001, channelCount: 2) }

        // The decoder checks the header against the stream's format.
        let header = encoder.codecHeader
        let mismatch = #expect(throws: MediaError.self) {
            _ = try ChunkDecoder(codec: .flac, sampleRate: 44100, channelCount: 2, codecHeader: header)
        }
        #expect(mismatch?.reason == "codec header says 48000 Hz × 2, stream says 44100 Hz × 2")
        #expect(throws: MediaError.self) { _ = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: []) }
        #expect(throws: MediaError.self) {
            _ = try ChunkDecoder(codec: .flac, sampleRate: Self.rate, channelCount: 2, codecHeader: Array(header.prefix(20)))
        }
    }

    // MARK: - Compression

    /// FLAC must really compress music-like content: well under the size of packed 24-bit PCM.
    /// Reports the ratios for a float source (noise floor at -70 dBFS, as from a lossy decode or
    /// a 24-bit master) and a 16-bit source (CD), whose zero low bits FLAC drops.
    @Test(arguments: [("float source", ["-c:a", "pcm_f32le"]), ("16-bit source", ["-c:a", "pcm_s16le"])])
    func flacCompressesMusic(_ source: String, _ codecArguments: [String]) throws {
        let input = try Self.music(seconds: 4, codecArguments: codecArguments)
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: Self.rate, channelCount: 2)
        let chunks = try Self.encode(input, channels: 2, sizes: [2048], with: encoder)
        let flacBytes = Double(chunks.reduce(0) { $0 + $1.packet.count })
        let f32Bytes = Double(input.count * 4)
        let s24Bytes = Double(input.count * 3)
        let report = String(format: "%@: FLAC/f32 = %.3f, FLAC/s24 = %.3f (%.0f kbit/s)",
                            source, flacBytes / f32Bytes, flacBytes / s24Bytes, flacBytes * 8 / (Double(input.count / 2) / Double(Self.rate)) / 1000)
        print("ChunkCodecTests compression, \(report)")
        #expect(flacBytes / s24Bytes < 0.8, "FLAC is not compressing: \(report)")
    }
}
