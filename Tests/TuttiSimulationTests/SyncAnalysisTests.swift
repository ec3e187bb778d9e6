import Foundation
import Testing
import TuttiDiagnostics
import TuttiTestSupport

/// The measuring instrument itself: `SyncAnalysis` must report where each room really played,
/// including a room that starts mid-stream inside a checkpoint's window.
struct SyncAnalysisTests {
    /// The multi-room groups tests' music (two tones, vibrato, pink noise): 220 and 331 Hz are
    /// back in phase 437 frames later, which is what fooled the analysis once.
    static func groupMusic(seconds: Int, in directory: TemporaryDirectory) throws -> [Float] {
        let path = directory.file("music.f32")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=220:d=\(seconds)", "-f", "lavfi", "-i", "sine=f=331:d=\(seconds)",
                              "-f", "lavfi", "-i", "anoisesrc=d=\(seconds):c=pink:a=0.15:seed=1",
                              "-filter_complex", "[0]vibrato=f=5[x];[x][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=0.8*c0,aresample=48000",
                              "-f", "f32le", path])
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// A simulated card's capture of `reference` heard from `startFrame` on (silence before),
    /// timeline frame f emitted at device frame `deviceOffset + f`, one frame every 1/48 000 s.
    static func capture(_ reference: [Float], from startFrame: Int, deviceOffset: Int) -> VirtualCapture {
        var samples = [Float](repeating: 0, count: deviceOffset * 2)
        samples += [Float](repeating: 0, count: startFrame * 2)
        samples += reference[(startFrame * 2)...]
        let frames = samples.count / 2
        let periods = stride(from: 0, to: frames, by: 480).map(Int64.init)
        return VirtualCapture(sampleRate: 48000, channelCount: 2, samples: samples, periodFrames: periods,
                              periodTimes: periods.map { 1_000_000_000 + $0 * 1_000_000_000 / 48000 })
    }

    /// A room that joins at timeline frame 168 087, 87 frames into the window of the checkpoint
    /// at 168 000 (what a room moved into a playing group did in CI), is found where it plays,
    /// in sync with the room that played all along: once it was reported 9.1 ms late there and
    /// at every checkpoint after, the tracking having followed the first, false, match.
    @Test func aRoomStartingInsideACheckpointsWindowIsFoundWhereItPlays() throws {
        let directory = try TemporaryDirectory("sync-analysis")
        defer { directory.remove() }
        let reference = try Self.groupMusic(seconds: 6, in: directory)
        for start in [168_087, 168_010, 168_300] {
            let rooms = [SyncAnalysis.Room(name: "a", capture: Self.capture(reference, from: 0, deviceOffset: 1000), latencyNanoseconds: 0),
                         SyncAnalysis.Room(name: "b", capture: Self.capture(reference, from: start, deviceOffset: 1000), latencyNanoseconds: 0)]
            let result = SyncAnalysis.analyse(rooms: rooms, reference: reference)
            let both = result.series.filter { $0.heard.count == 2 }
            #expect(both.count >= 6, "b joining at \(start) was matched at \(both.count) checkpoints")
            #expect(both.first?.frame == 168_000, "b joining at \(start) first found at \(both.first?.frame ?? -1)")
            for point in both {
                let skew = abs(point.heard["a"]! - point.heard["b"]!)
                #expect(skew < 1_000, "b joining at \(start): \(skew / 1000) µs from a at timeline frame \(point.frame)")
            }
            #expect(result.discontinuities["b"] == 0, "b joining at \(start): \(result.jumps)")
        }
    }
}
