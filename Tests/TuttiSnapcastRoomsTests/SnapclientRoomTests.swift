import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Debian's snapclient 0.26 joins the house on its Snapcast port and plays, through the ALSA
/// virtual card (Devices/alsa-virtual), beside a Tutti room on `virtual:`; the two cards'
/// output is compared sample by sample.
@Suite(.serialized) struct SnapclientRoomTests {
    static var cardLibrary: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/alsa/libasound_module_pcm_tutti_virtual.so").path
    }

    /// The house, Tutti room a (+40 ppm) and snapclient `snap1` on the card (−30 ppm).
    struct House {
        let server: ChildProcess, a: ChildProcess, snapclient: ChildProcess
        let control: HouseControlPort

        init(directory: TemporaryDirectory) async throws {
            guard FileManager.default.fileExists(atPath: SnapclientRoomTests.cardLibrary) else {
                throw TestFailure("\(SnapclientRoomTests.cardLibrary) is missing: build it with `make alsa-virtual` (make test does)")
            }
            let config = directory.file("asoundrc")
            try """
                pcm_type.tutti_virtual { lib "\(SnapclientRoomTests.cardLibrary)" }
                pcm.room { type tutti_virtual  path "\(directory.file("snap1.wav"))"  ppm -30  period 480  buffer 1920 }
                """.write(toFile: config, atomically: true, encoding: .utf8)
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off",
                                                                  "--snapcast-control", "off", "--snapcast", "127.0.0.1:0"],
                                      standardError: directory.file("server.log"))
            let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
            control = HouseControlPort(port: port)
            let snapcastLine = try server.waitForLine(containing: "snapclients on")
            let snapcastPort = String(snapcastLine.split(separator: " ")[4].split(separator: ":").last!)
            a = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--output", "virtual:" + directory.file("a.wav"),
                                                        "--device-drift-ppm", "40"], standardError: directory.file("a.log"))
            // The test runner's threads block SIGINT and SIGTERM, and a child inherits the mask;
            // snapclient only stops on them (tutti's processes wait for them with sigwait), so
            // it is started with them unblocked.
            let unblock = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM}); os.execvp(sys.argv[1], sys.argv[1:])"
            snapclient = try ChildProcess(name: "snapclient", executable: "/usr/bin/env",
                                          arguments: ["ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:" + config, "python3", "-c", unblock,
                                                      "snapclient", "-h", "127.0.0.1", "-p", snapcastPort,
                                                      "--hostID", "snap1", "--player", "alsa", "-s", "room", "--logsink", "stderr"],
                                          standardError: directory.file("snapclient.log"))
            try await control.waitForRooms(["a", "snap1"])
        }

        func stopAll() {
            a.interrupt()
            snapclient.interrupt()
            server.interrupt()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aSnapclientPlaysInSyncWithATuttiRoom() async throws {
        let directory = try TemporaryDirectory("snapclient-room")
        defer { directory.preserveLogs(as: "snapclient-room"); directory.remove() }
        let music = directory.file("music.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=14:c=pink:a=0.3:seed=21", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", music])
        let house = try await House(directory: directory)
        defer { house.stopAll() }
        _ = try await house.control.send(.play(files: [music], rooms: nil))
        try await house.control.waitForPosition(12)
        #expect(house.a.interrupt() == 0)
        house.snapclient.process.send(SIGTERM)
        #expect(house.snapclient.waitForExit(timeout: 10) == 0)

        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: try VirtualCapture(path: directory.file("a.wav")), latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "snap1", capture: try VirtualCapture(path: directory.file("snap1.wav")), latencyNanoseconds: 0)],
                                            reference: reference, interval: 4800)
        let snapOnly = analysis.series.filter { $0.heard["snap1"] == nil && $0.heard["a"] != nil }.count
        print("snapclient room: skew p50 \(analysis.percentile(50) / 1000) µs, p99 \(analysis.percentile(99) / 1000) µs, max \(analysis.maximum / 1000) µs over \(analysis.skews.count) checkpoints; "
              + "jumps \(analysis.jumps.map { "\($0.room) \(Int($0.frames))" }), underruns \(analysis.underruns), unmatched \(analysis.unmatched), a without snap1 at \(snapOnly)")
        #expect(analysis.skews.count > 80)
        #expect(analysis.percentile(99) / 1000 < 200)
        #expect(analysis.discontinuities["snap1"] == 0 && analysis.discontinuities["a"] == 0)
        #expect(snapOnly <= 1)
    }
}
