import Testing
import TuttiMedia
import TuttiProtocol
@testable import TuttiHouse
import TuttiTestSupport

/// The bits the house keeps of each item on the wire (`TrackInfo.wireBits`): a 16-bit or lossy
/// source is rounded to 16 bits after resampling, so rooms hold it at 16-bit FLAC's cost; a
/// 24-bit source keeps its 24.
@Suite(.serialized) struct HouseWireDepthTests {
    /// Whether every sample in `frames` is a multiple of 2⁻¹⁵.
    static func onSixteenBitGrid(_ audio: [Float], frames: Range<Int>) -> Bool {
        audio[(frames.lowerBound * 2)..<(frames.upperBound * 2)].allSatisfy { ($0 * 32768).rounded() == $0 * 32768 }
    }

    @Test func sixteenBitAndLossyItemsGoAtSixteenBitsAndTwentyFourBitItemsAtTwentyFour() async throws {
        let directory = try TemporaryDirectory("house-wire-depth")
        defer { directory.remove() }
        // One second each at 44.1 kHz, so the house resamples every item to 48 kHz: what it sends
        // falls between the source's steps unless the house rounds it.
        let cd = directory.file("cd.flac"), studio = directory.file("studio.flac"), lossy = directory.file("lossy.mp3")
        let tone = ["-f", "lavfi", "-i", "aevalsrc=exprs='0.4*sin(2*PI*440*t)|0.3*sin(2*PI*550*t)':s=44100:d=1"]
        try TestMedia.ffmpeg(tone + ["-c:a", "flac", "-sample_fmt", "s16", cd])
        try TestMedia.ffmpeg(tone + ["-c:a", "flac", "-sample_fmt", "s32", "-bits_per_raw_sample", "24", studio])
        try TestMedia.ffmpeg(tone + ["-c:a", "libmp3lame", "-b:a", "256k", lossy])
        #expect(try AudioFileDecoder(path: cd).info.wireBits == 16)
        #expect(try AudioFileDecoder(path: studio).info.wireBits == 24)
        #expect(try AudioFileDecoder(path: lossy).info.wireBits == 16)

        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [cd, studio, lossy]))
        let stream = try await harness.waitForProduction()
        let audio = try HouseHarness.audio(try await harness.messages("kitchen"), stream: stream.id, from: 0, frames: 3 * 48000)
        #expect(!audio.contains { $0.isNaN }, "a room was not sent every frame")

        // Away from the joins, where a chunk holds two items and keeps the larger depth.
        let cdFrames = 2048..<(48000 - 2048), studioFrames = (48000 + 2048)..<(96000 - 2048)
        let lossyFrames = (96000 + 4096)..<(144_000 - 4096)
        #expect(Self.onSixteenBitGrid(audio, frames: cdFrames), "the 16-bit item was sent with more bits")
        #expect(Self.onSixteenBitGrid(audio, frames: lossyFrames), "the lossy item was sent with more bits")
        #expect(!Self.onSixteenBitGrid(audio, frames: studioFrames), "the 24-bit item was rounded to 16 bits")

        // Rounded, not shifted or scaled: the 16-bit item matches the 24-bit one, the same tone
        // through the same resampler (whole cycles per second, so it continues seamlessly), to
        // the source's and the wire's 16-bit steps.
        let cdSent = Array(audio[(cdFrames.lowerBound * 2)..<(cdFrames.upperBound * 2)])
        let studioSent = Array(audio[((cdFrames.lowerBound + 48000) * 2)..<((cdFrames.upperBound + 48000) * 2)])
        #expect(SignalCheck.maxDifference(cdSent, studioSent) < 2.0 / 32768)
        #expect(SignalCheck.rms(cdSent, channels: 2, frames: 0..<(cdSent.count / 2)) > 0.2)
    }
}
