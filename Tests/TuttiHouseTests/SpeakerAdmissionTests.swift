import Foundation
import NIOPosix
import Testing
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Speaker admission and the encrypted wire, with real processes: the house, speakers, `tutti
/// ctl`, and a relay on the path that eavesdrops and flips a byte. What is checked is what the
/// speakers' sound cards emitted and what crossed the wire, not log lines alone.
@Suite struct SpeakerAdmissionTests {
    func startServer(in directory: TemporaryDirectory, state: String) throws -> (ChildProcess, HouseControlPort) {
        let server = try ChildProcess(name: "server-\(state)", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off",
                                                                        "--snapcast-control", "off", "--state-dir", directory.file(state)],
                                      standardError: directory.file("\(state).log"))
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        return (server, try HouseControlPort(port: port, stateDirectory: directory.file(state)))
    }

    func speaker(_ name: String, state: String, port: Int, output: String, in directory: TemporaryDirectory) throws -> ChildProcess {
        try ChildProcess(name: output, arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", name, "--state-dir", directory.file(state),
                                                   "--output", "virtual:" + directory.file("\(output).wav")],
                         standardError: directory.file("\(output).log"))
    }

    func waitForLog(_ path: String, containing text: String, timeout: Double = 30) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw TestFailure("\(path): no line containing \"\(text)\" within \(timeout) s")
    }

    func lines(_ path: String, containing text: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains(text) }.map(String.init)
    }

    /// A stranger's speaker that says hello with the name of an admitted room waits, listed with
    /// a code that is not the room's; it takes nothing over and its card stays silent while the
    /// house plays. The admitted speaker, pointed at another house, refuses it in one line and
    /// plays nothing from it.
    @Test(.timeLimit(.minutes(3)))
    func aStrangersSpeakerHearsNothingAndAFakeHouseIsRefused() async throws {
        let directory = try TemporaryDirectory("speaker-admission")
        defer { directory.preserveLogs(as: "speaker-admission"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=12:c=pink:a=0.3:seed=3", "-ac", "2", "-ar", "48000", music])
        let (server, house) = try startServer(in: directory, state: "house")
        defer { server.interrupt() }
        let a = try speaker("a", state: "speaker-a", port: house.port, output: "a", in: directory)
        defer { a.interrupt() }
        // The user's way: `tutti ctl admit` waits for the new speaker to knock.
        let admitted = try TestMedia.run(ChildProcess.tuttiExecutable, ["ctl", "--server", "127.0.0.1:\(house.port)", "--token-file",
                                                                        directory.file("house/controller-token"), "admit", "a"], timeout: 30)
        let ownCode = try #require(try await waitForLog(directory.file("a.log"), containing: "waiting to be admitted").split(separator: "(code ").last?.prefix(7))
        #expect(String(decoding: admitted, as: UTF8.self) == "admitted a (code \(ownCode))\n")
        _ = try await waitForLog(directory.file("a.log"), containing: "admitted to the house")
        // Not `waitForRooms`, from here on: it admits whoever waits, as the household would its own.
        try await house.waitForRooms(["a"])

        // The stranger: another key, the same name.
        let rogue = try speaker("a", state: "rogue", port: house.port, output: "rogue", in: directory)
        defer { rogue.interrupt() }
        let rogueLine = try await waitForLog(directory.file("rogue.log"), containing: "waiting to be admitted")
        var listed: WaitingSpeakerReport?
        let deadline = Date().addingTimeInterval(30)
        while listed == nil {
            guard Date() < deadline else { throw TestFailure("the rogue speaker was never listed as waiting") }
            listed = try await house.send(.rooms).rooms?.waiting?.first { $0.name == "a" }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let waiting = try #require(listed)
        #expect(rogueLine.contains("(code \(waiting.code))"), "the house lists the code the speaker shows: \(waiting) / \(rogueLine)")
        #expect(waiting.code != String(ownCode), "a stranger's key shows another code")

        // A second stranger of the same name, waiting before the music starts, so both cards run
        // while the house plays (CI once stopped a later one 5760 frames in, and its card's
        // silence then proved little).
        let other = try speaker("a", state: "rogue-2", port: house.port, output: "rogue-2", in: directory)
        defer { other.interrupt() }
        _ = try await waitForLog(directory.file("rogue-2.log"), containing: "waiting to be admitted")

        _ = try await house.send(.play(files: [music], rooms: nil))
        try await house.waitForPosition(6)
        let rooms = try #require(try await house.send(.rooms).rooms)
        #expect(rooms.rooms.map(\.name) == ["a"] && rooms.rooms.first?.reconnects == 0, "the strangers' hellos took the room over: \(rooms)")
        #expect(rooms.waiting?.count == 2, "\(rooms)")
        // With two of one name waiting, the name alone admits neither.
        let ambiguous = await #expect(throws: ControlRefusal.self) { try await house.send(.admit(speaker: "a")) }
        #expect(ambiguous?.error.contains("2 speakers named a wait") == true, "\(String(describing: ambiguous))")
        rogue.interrupt()
        other.interrupt()
        let heard = try VirtualCapture(path: directory.file("a.wav"))
        #expect(heard.firstSoundFrame() != nil, "the admitted room played nothing")
        for stranger in ["rogue", "rogue-2"] {
            let capture = try VirtualCapture(path: directory.file("\(stranger).wav"))
            #expect(capture.frameCount > 4 * 48000, "\(stranger)'s card ran while the house played: \(capture.frameCount) frames")
            #expect(capture.firstSoundFrame() == nil, "\(stranger)'s card emitted sound")
        }

        // Another house (a fake one, or another household's): the admitted speaker refuses it.
        let (fakeServer, fake) = try startServer(in: directory, state: "fake")
        defer { fakeServer.interrupt() }
        _ = try await fake.send(.play(files: [music], rooms: nil))
        let moved = try speaker("a", state: "speaker-a", port: fake.port, output: "a-at-fake", in: directory)
        defer { moved.interrupt() }
        let refusal = try await waitForLog(directory.file("a-at-fake.log"), containing: "belongs to the house")
        #expect(refusal.contains("and the house at 127.0.0.1:\(fake.port) is another") && refusal.contains("staying silent"), "\(refusal)")
        // It tries again (its own house may come back at that address), and says so only once.
        try await Task.sleep(nanoseconds: 5_000_000_000)
        #expect(lines(directory.file("a-at-fake.log"), containing: "belongs to the house").count == 1)
        let seen = try #require(try await fake.send(.rooms).rooms)
        #expect(seen.rooms.isEmpty && (seen.waiting ?? []).isEmpty, "the fake house got the speaker: \(seen)")
        moved.interrupt()
        let atFake = try VirtualCapture(path: directory.file("a-at-fake.wav"))
        #expect(atFake.firstSoundFrame() == nil, "the speaker played from another house")

        // Forgotten, the speaker's connection ends and it waits again (a new connection, a new code).
        // The knocks are counted before the forget: the speaker reconnects 0.1 s after the house
        // lets it go, and on a loaded CI machine it had knocked before the forget's reply came
        // back, so a count taken after it waited for a knock that had already happened.
        let knocks = "speaker a from 127.0.0.1 waits to be admitted"
        let before = lines(directory.file("house.log"), containing: knocks).count
        _ = try await house.send(.forget(speaker: "a"))
        let knockedBy = Date().addingTimeInterval(30)
        while lines(directory.file("house.log"), containing: knocks).count <= before {
            guard Date() < knockedBy else { throw TestFailure("the forgotten speaker did not knock again") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    /// A relay on the path flips one byte of what the house sends, and keeps a copy of what
    /// crosses. The speaker drops the connection at the bad record, reconnects and plays on
    /// from its buffer: its card emits every sample of the music, in order, with no gap. The
    /// copy shows nothing of the music: no FLAC frame header of its format, no tag, about 8 bits
    /// of entropy a byte.
    @Test(.timeLimit(.minutes(3)))
    func aFlippedByteIsSurvivedAndTheWireShowsNoAudio() async throws {
        let directory = try TemporaryDirectory("secure-wire")
        defer { directory.preserveLogs(as: "secure-wire"); directory.remove() }
        let music = directory.file("music.flac")
        let title = "Tutti Secret Title 7Q"
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=10:c=pink:a=0.3:seed=9", "-ac", "2", "-ar", "48000", "-metadata", "title=\(title)", music])
        let (server, house) = try startServer(in: directory, state: "house")
        defer { server.interrupt() }
        let proxy = ImpairmentProxy(upstreamHost: "127.0.0.1", upstreamPort: house.port, impairment: .init(), group: MultiThreadedEventLoopGroup.singleton)
        let proxyPort = try await proxy.start()
        defer { Task { try? await proxy.stop() } }
        // Far into the stream: the speaker holds seconds of audio by then, and plays on.
        proxy.tapToClients(flipAt: 600_000, captureLimit: 8 << 20)
        let a = try speaker("a", state: "speaker-a", port: proxyPort, output: "a", in: directory)
        defer { a.interrupt() }
        try await house.waitForRooms(["a"])
        _ = try await house.send(.play(files: [music], rooms: nil))
        // To the end of the music, and the room's last sample.
        let endBy = Date().addingTimeInterval(40)
        while try await house.send(.status).status?.state != "stopped" {
            guard Date() < endBy else { throw TestFailure("the music did not end") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(proxy.hasFlipped, "the stream never reached the flipped byte")
        let speakerLog = directory.file("a.log")
        let dropped = lines(speakerLog, containing: "fails authentication")
        #expect(dropped.count == 1 && dropped[0].contains("reconnecting in"), "\(dropped)")
        let room = try #require(try await house.send(.rooms).rooms?.rooms.first)
        #expect(room.reconnects == 1 && room.underruns == 0, "\(room)")
        a.interrupt()

        // Every sample, in order: matched against the file all through, no gap, skip or repeat.
        let reference = try TestMedia.decodeWithFFmpeg(music, sampleRate: 48000, channels: 2)
        let analysis = SyncAnalysis.analyse(rooms: [.init(name: "a", capture: try VirtualCapture(path: directory.file("a.wav")), latencyNanoseconds: 0)],
                                            reference: reference, interval: 2400, edgeFrames: 4800)
        #expect(analysis.series.count > 150, "checkpoints: \(analysis.series.count)")
        #expect(analysis.discontinuities["a"] == 0 && analysis.underruns["a"] == 0 && analysis.unmatched["a"] == 0,
                "discontinuities \(analysis.discontinuities), underruns \(analysis.underruns), unmatched \(analysis.unmatched), jumps \(analysis.jumps.prefix(3))")

        // What an eavesdropper holds.
        let captured = proxy.capturedToClients
        #expect(captured.count > 500_000, "captured \(captured.count) bytes")
        let plain = try Data(contentsOf: URL(fileURLWithPath: music))
        let headersInFile = FLACHeaderScan.count(in: Array(plain), sampleRateCode: 0xA)
        #expect(headersInFile > 50, "the scan finds the file's own frames: \(headersInFile)")
        #expect(FLACHeaderScan.count(in: captured, sampleRateCode: 0xA) == 0, "a FLAC frame header of the stream's format on the wire")
        #expect(!FLACHeaderScan.contains(captured, Array("fLaC".utf8)) && !FLACHeaderScan.contains(captured, Array(title.utf8)))
        let entropy = FLACHeaderScan.entropy(captured)
        print("secure wire: \(captured.count) bytes captured, \(String(format: "%.4f", entropy)) bits a byte; the file's own: "
              + "\(String(format: "%.4f", FLACHeaderScan.entropy(Array(plain)))) bits a byte, \(headersInFile) frame headers")
        #expect(entropy > 7.99, "entropy \(entropy) bits a byte")
    }
}

/// Looks for FLAC in bytes: frame headers that hold (sync code, valid fields, CRC-8), the
/// stream marker, a tag's text; and measures their entropy.
enum FLACHeaderScan {
    /// Frame headers of 2-channel audio at `sampleRateCode` (0xA: 48 kHz) whose CRC-8 is right:
    /// random bytes give one in about 10⁹ positions.
    static func count(in bytes: [UInt8], sampleRateCode: UInt8) -> Int {
        var found = 0
        var index = 0
        while index + 16 < bytes.count {
            defer { index += 1 }
            guard bytes[index] == 0xFF, bytes[index + 1] & 0xFE == 0xF8 else { continue }
            let blockSize = bytes[index + 2] >> 4, rate = bytes[index + 2] & 0x0F
            let channels = bytes[index + 3] >> 4, sampleSize = (bytes[index + 3] >> 1) & 0x07, reserved = bytes[index + 3] & 1
            guard blockSize != 0, rate == sampleRateCode, [1, 8, 9, 10].contains(channels), sampleSize != 3, sampleSize != 7, reserved == 0 else { continue }
            // The frame or sample number, UTF-8 coded.
            var length = 4
            let lead = bytes[index + 4]
            let extra = lead < 0x80 ? 0 : lead >= 0xFE ? 6 : lead >= 0xFC ? 5 : lead >= 0xF8 ? 4 : lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : -1
            guard extra >= 0 else { continue }
            length += 1 + extra
            guard (0..<extra).allSatisfy({ bytes[index + 5 + $0] & 0xC0 == 0x80 }) else { continue }
            length += blockSize == 6 ? 1 : blockSize == 7 ? 2 : 0
            guard index + length < bytes.count else { continue }
            if crc8(bytes[index..<(index + length)]) == bytes[index + length] { found += 1 }
        }
        return found
    }

    static func crc8(_ bytes: ArraySlice<UInt8>) -> UInt8 {
        var crc: UInt8 = 0
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return crc
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count, let first = needle.first else { return false }
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first && Array(haystack[index..<(index + needle.count)]) == needle { return true }
            index += 1
        }
        return false
    }

    /// Shannon entropy of the bytes' histogram, bits a byte (8 for random bytes).
    static func entropy(_ bytes: [UInt8]) -> Double {
        var counts = [Int](repeating: 0, count: 256)
        for byte in bytes { counts[Int(byte)] += 1 }
        let total = Double(bytes.count)
        return counts.reduce(0.0) { sum, count in count == 0 ? sum : sum - Double(count) / total * log2(Double(count) / total) }
    }
}
