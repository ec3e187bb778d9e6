import Foundation
import Testing
import TuttiCore
import TuttiProtocol
import TuttiImpairment
import TuttiSimulation
@testable import TuttiDiagnostics
import TuttiTestSupport

/// A stereo pair of two speaker processes with skewed clocks and crystals, measured from their
/// virtual sound cards: bound with `pair`, the two rooms are one room to the controllers (one
/// volume for both); the left card carries the music's left channel on both its outputs and
/// nothing of the right, the right card the right; the two halves play within a few
/// microseconds of each other; unbound, they are two rooms in stereo again.
extension MultiRoomEndToEndTests {
    /// `seconds` of music whose left and right channels are independent: other tones, other
    /// vibrato and other noise on each side, at 44.1 kHz so that the house resamples.
    func stereoMusic(_ path: String, seconds: Int) throws {
        var inputs: [String] = []
        for source in ["sine=f=220", "sine=f=331", "anoisesrc=c=pink:a=0.15:r=44100:seed=1", "sine=f=294", "sine=f=415", "anoisesrc=c=pink:a=0.15:r=44100:seed=2"] {
            inputs += ["-f", "lavfi", "-i", "\(source):d=\(seconds)"]
        }
        let mono = "aformat=sample_fmts=fltp:sample_rates=44100:channel_layouts=mono"
        try TestMedia.ffmpeg(inputs + ["-filter_complex",
                                       "[0]vibrato=f=5[a];[a][1][2]amix=inputs=3,\(mono)[l];[3]vibrato=f=7[b];[b][4][5]amix=inputs=3,\(mono)[r];"
                                       + "[l][r]join=inputs=2:channel_layout=stereo",
                                       path])
    }

    /// One channel of interleaved stereo, on both channels.
    func bothChannels(of stereo: [Float], channel: Int) -> [Float] {
        var out = [Float](repeating: 0, count: stereo.count)
        for frame in 0..<(stereo.count / 2) {
            out[frame * 2] = stereo[frame * 2 + channel]
            out[frame * 2 + 1] = stereo[frame * 2 + channel]
        }
        return out
    }

    @Test(.timeLimit(.minutes(3)))
    func aStereoPairPlaysLeftAndRightInSync() async throws {
        let p99 = try await playStereoPair(network: nil)
        #expect(p99 <= 50, "the halves were \(p99) µs apart (p99)")
    }

    /// The same pair with its right half behind a home network (`ImpairmentProxy` with a
    /// `NetworkModel`, on a 1 ms floor), the left on the loopback: the halves' time apart is
    /// reported (issue 36 asks for the figure, issue 33's targets apply to any two rooms).
    @Test(.timeLimit(.minutes(3)), arguments: ["uniform", "power-save", "coarse-timers-4ms"])
    func aStereoPairWithOneHalfBehindAHomeNetwork(model: String) async throws {
        let p99 = try await playStereoPair(network: NetworkModel.named(model)!.withBaseDelay(1_000_000))
        // A guard against gross failure (a lost clock, a half a period off): the figure itself
        // is issue 33's to bring under its targets (29.5, 43.8 and 100.2 µs when written, a
        // few seconds after the clocks settled: a 4 ms grid's floors take longer to find).
        #expect(p99 <= 500, "the halves were \(p99) µs apart (p99) with the right one behind \(model)")
    }

    /// Plays 9 s of music into the pair kl + kr ("Kitchen"), kr behind `network` if given,
    /// checks both cards, and returns the p99 of the halves' time apart, in µs.
    func playStereoPair(network: NetworkModel?) async throws -> Double {
        let label = "stereo-pair" + (network.map { "-" + $0.name } ?? "")
        let directory = try TemporaryDirectory(label)
        defer { directory.preserveLogs(as: label); directory.remove() }
        let music = directory.file("music.flac")
        try stereoMusic(music, seconds: 9)
        let specs = [RoomSpec(name: "kl", offset: "300", drift: "50", device: "-30", latency: "0"),
                     RoomSpec(name: "kr", offset: "-700", drift: "-80", device: "60", latency: "0")]
        var impairment = Self.homeNetwork
        impairment.network = network
        let (server, port, speakers, proxy) = try await startHouse(in: directory, rooms: specs, proxying: network == nil ? nil : "kr",
                                                                   impairment: impairment)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        // A pair's name may not be taken by another room, nor be one half twice.
        await #expect(throws: ControlRefusal.self) { try await send(.pair(left: "kl", right: "kl", name: "Kitchen"), port: port) }
        let paired = try await send(.pair(left: "kl", right: "kr", name: "Kitchen"), port: port)
        #expect(paired.room?.room == "Kitchen" && paired.room?.pair?.left.name == "kl" && paired.room?.pair?.right.name == "kr",
                "\(String(describing: paired.room))")
        // One room to every controller, named by the pair, reached by its name or a half's.
        let listed = try await rooms(port)
        #expect(Array(listed.keys) == ["Kitchen"], "\(listed.keys)")
        #expect(try await send(.status, port: port).status?.rooms.map(\.name) == ["Kitchen"])
        await #expect(throws: ControlRefusal.self) { try await send(.roomChannel(room: "Kitchen", channel: .mono), port: port) }
        // Its volume is both halves': 90 % is −6 dB (gain 0.501).
        #expect(try await send(.volume(room: "kr", percent: 90), port: port).room?.room == "Kitchen")
        let started = try await send(.play(files: [music]), port: port)
        #expect(started.started?.rooms == ["Kitchen"], "\(String(describing: started.started))")
        // To the end of the music (a room reports idle before its first block as well as after its last).
        try await waitForRooms(port, timeout: 30) { rooms in (rooms["Kitchen"]?.playheadSeconds ?? 0) > 8.9 }
        try await Task.sleep(nanoseconds: 300_000_000)
        // Unbound: two rooms again, each in stereo, with their own names.
        let unpaired = try await send(.unpair(room: "Kitchen"), port: port)
        #expect(unpaired.rooms?.rooms.map(\.name).sorted() == ["kl", "kr"] && unpaired.rooms?.rooms.allSatisfy { $0.channel == nil && $0.pair == nil } == true,
                "\(String(describing: unpaired.rooms))")
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        let captures = try captures(in: directory, rooms: specs)
        let left = captures[0], right = captures[1]
        // Each card carries one channel on both its outputs: the same samples, bit for bit.
        for room in [left, right] {
            let samples = room.capture.samples
            let differing = stride(from: 0, to: samples.count - 1, by: 2).filter { samples[$0] != samples[$0 + 1] }.count
            let loud = stride(from: 0, to: samples.count, by: 2).filter { abs(samples[$0]) > 0.01 }.count
            #expect(differing == 0 && loud > 48000 * 5, "\(room.name): \(differing) frames whose two outputs differ, \(loud) loud frames")
        }
        let stereo = reference(music)
        let leftHeard = SyncAnalysis.analyse(rooms: [left], reference: bothChannels(of: stereo, channel: 0), interval: 4800)
        let rightHeard = SyncAnalysis.analyse(rooms: [right], reference: bothChannels(of: stereo, channel: 1), interval: 4800)
        // The left card is the music's left channel at the pair's volume, and not its right.
        for (heard, name) in [(leftHeard, "kl"), (rightHeard, "kr")] {
            let gains = heard.gains.compactMap { $0.gain[name] }
            print("stereo pair: \(name) matched \(gains.count) checkpoints, gain \(gains.min() ?? .nan)…\(gains.max() ?? .nan), unmatched \(heard.unmatched[name] ?? -1)")
            #expect(gains.count >= 50 && gains.allSatisfy { abs($0 - 0.501) < 0.01 }, "\(name)'s gain against its channel: \(gains)")
            #expect(heard.unmatched[name] == 0 && heard.discontinuities[name] == 0 && heard.underruns[name] == 0, "\(heard.jumps)")
        }
        let crossed = SyncAnalysis.analyse(rooms: [left], reference: bothChannels(of: stereo, channel: 1), interval: 4800)
        #expect(crossed.gains.compactMap { $0.gain["kl"] }.count < 5, "the left card matched the right channel")
        // The halves, checkpoint by checkpoint: when each emitted the same frame.
        let rightTimes = Dictionary(uniqueKeysWithValues: rightHeard.series.compactMap { point in point.heard["kr"].map { (point.frame, $0) } })
        let gaps = leftHeard.series.compactMap { point -> Double? in
            guard let l = point.heard["kl"], let r = rightTimes[point.frame] else { return nil }
            return abs(l - r)
        }.sorted()
        let p99 = nearestRankPercentile(gaps, 99) / 1000
        print("stereo pair\(network.map { " (right half behind \($0.name))" } ?? ""): between the halves p50 \(nearestRankPercentile(gaps, 50) / 1000) µs, "
              + "p99 \(p99) µs, max \((gaps.last ?? .nan) / 1000) µs over \(gaps.count) checkpoints")
        #expect(gaps.count >= 50, "\(gaps.count) checkpoints heard by both halves")
        try await proxy?.proxy.stop()
        return p99
    }
}
