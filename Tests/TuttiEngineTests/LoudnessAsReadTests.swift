import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiEngine
import TuttiMedia
import TuttiTestSupport

/// An entry that asks for it is measured as the reader reads it (`Entry.measuresLoudness`),
/// before its gain and at its own rate: the same loudness as the library's meter finds decoding
/// the file on its own; an item not read whole (started by a seek, cut by its end time) is not
/// measured, nor an item whose entry does not ask.
@Suite struct LoudnessAsReadTests {
    @Test func anItemReadWholeIsMeasuredAsTheFileIs() throws {
        let directory = try TemporaryDirectory("loudness-as-read")
        defer { directory.remove() }
        let path = directory.file("noise.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:a=0.2:seed=4:d=5:r=44100", "-ac", "2", path])
        let file = try #require(try LoudnessMeter.measure(path: path))

        func outcomes(_ entries: [GaplessQueueReader.Entry], offset: MediaTime = .zero) -> [ItemOutcome] {
            let reader = GaplessQueueReader(entries: entries, outputRate: 48_000, channelCount: 2, offset: offset)
            let ended = Mutex<[ItemOutcome]>([])
            reader.onItem = { outcome in if outcome.frameCount > 0 { ended.withLock { $0.append(outcome) } } }
            var block: [Float] = []
            while reader.read(into: &block) > 0 {}
            return ended.withLock { $0 }
        }
        // Read at a gain and resampled to 48 kHz: measured as the file is, before both.
        let whole = outcomes([GaplessQueueReader.Entry(path: path, tag: 0, gain: 0.25, measuresLoudness: true),
                              GaplessQueueReader.Entry(path: path, tag: 1)])
        #expect(whole.count == 2)
        let measured = try #require(whole[0].measuredLoudness)
        #expect(abs(measured.integratedLUFS - file.integratedLUFS) < 0.001 && abs(measured.peak - file.peak) < 1e-6, "\(measured) against \(file)")
        #expect(whole[1].measuredLoudness == nil)
        // Not read whole: from a seek, or to an end time.
        #expect(outcomes([GaplessQueueReader.Entry(path: path, tag: 0, measuresLoudness: true)], offset: MediaTime(frame: 1, sampleRate: 1))
            .first?.measuredLoudness == nil)
        #expect(outcomes([GaplessQueueReader.Entry(path: path, endTime: MediaTime(frame: 2, sampleRate: 1), tag: 0, measuresLoudness: true)])
            .first?.measuredLoudness == nil)
    }
}
