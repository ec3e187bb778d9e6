import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiSimulation
import TuttiTestSupport

/// Groups through the HTTP API: made, listed and refused with reasons; a room moved into a
/// group under `/api/groups/{group}` plays that group's music; that group's volume and pause
/// act on its room's card alone.
extension HouseAPITests {
    @Test(.timeLimit(.minutes(2)))
    func groupsThroughHTTP() async throws {
        let directory = try TemporaryDirectory("http-api-groups")
        defer { directory.preserveLogs(as: "http-api-groups"); directory.remove() }
        let low = directory.file("440.flac"), high = directory.file("660.flac")
        for (path, frequency) in [(low, 440), (high, 660)] {
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=10", "-ac", "2", path])
        }
        let house = try House(in: directory, otherRooms: ["b"])
        defer { house.stop() }
        try await waitForRoom(house, ["a", "b"])

        let listed = try await house.request(.GET, house.api + "/groups")
        let groups = listed.json["groups"] as? [[String: Any]] ?? []
        #expect(listed.status == 200 && groups.count == 1 && groups.first?["name"] as? String == "default"
                && groups.first?["isDefault"] as? Bool == true && groups.first?["rooms"] as? [String] == ["a", "b"], "\(listed.json)")
        let created = try await house.request(.POST, house.api + "/groups", body: #"{"name":"Radio"}"#)
        #expect(created.status == 200 && (created.json["groups"] as? [[String: Any]])?.map { $0["name"] as? String } == ["default", "Radio"], "\(created.json)")
        let moved = try await house.request(.POST, house.api + "/groups/Radio/rooms/b/join")
        #expect(moved.status == 200 && moved.json["group"] as? String == "Radio" && moved.json["room"] as? String == "b", "\(moved.json)")

        // Bad requests, each refused with its reason; nothing else changes.
        let refusals: [(HTTPMethod, String, String?, Int, String)] = [
            (.POST, "/groups", #"{"name":"Radio"}"#, 409, "a group named Radio exists"),
            (.POST, "/groups/Radio/rooms/b/join", nil, 409, "already in group Radio"),
            (.POST, "/groups/Nowhere/transport/pause", nil, 404, "no such group: Nowhere"),
            (.DELETE, "/groups/default", nil, 409, "cannot be removed"),
            (.POST, "/groups/Radio/rooms/zz/join", nil, 404, "no such room: zz"),
            (.POST, "/groups", #"{"name":"   "}"#, 400, "a group name needs"),
        ]
        for (method, path, body, code, reason) in refusals {
            let reply = try await house.request(method, house.api + path, body: body)
            #expect(reply.status == code && (reply.json["error"] as? String)?.contains(reason) == true, "\(method) \(path): \(reply.status) \(reply.json)")
        }

        // Each group plays its own tone.
        let album = try await house.request(.POST, house.api + "/transport/play", body: #"{"files":["\#(low)"]}"#)
        #expect(album.status == 200 && album.json["rooms"] as? [String] == ["a"], "\(album.json)")
        let radio = try await house.request(.POST, house.api + "/groups/Radio/transport/play", body: #"{"files":["\#(high)"]}"#)
        #expect(radio.status == 200 && radio.json["rooms"] as? [String] == ["b"], "\(radio.json)")
        try await waitForPlayhead(house, beyond: 2)
        let radioStatus = try await house.request(.GET, house.api + "/groups/Radio/status")
        #expect(radioStatus.json["group"] as? String == "Radio" && radioStatus.json["state"] as? String == "playing", "\(radioStatus.json)")
        // The radio's volume, then its pause: a's card notices neither.
        let volumeTime = MonotonicClock().now()
        let volume = try await house.request(.PUT, house.api + "/groups/Radio/volume", body: #"{"percent":50}"#)
        #expect(volume.status == 200 && volume.json["percent"] as? Int == 50, "\(volume.json)")
        try await waitForPlayhead(house, beyond: 4)
        let pauseTime = MonotonicClock().now()
        let pause = try await house.request(.POST, house.api + "/groups/Radio/transport/pause")
        #expect(pause.status == 200, "\(pause.json)")
        try await waitForPlayhead(house, beyond: 6)
        let afterPause = try await house.request(.GET, house.api + "/groups")
        let states = (afterPause.json["groups"] as? [[String: Any]] ?? []).map { "\($0["name"] ?? "")=\($0["state"] ?? "")" }
        #expect(states == ["default=playing", "Radio=paused"], "\(states)")
        // The metrics per group say the same.
        let scraped = try await metrics(house)
        print("HTTP groups: /metrics per group: \(scraped.filter { $0.key.hasPrefix("tutti_group_") }.sorted { $0.key < $1.key })")
        #expect(scraped["tutti_group_playing{default}"] == 1 && scraped["tutti_group_playing{Radio}"] == 0)
        #expect(scraped["tutti_group_rooms{default}"] == 1 && scraped["tutti_group_rooms{Radio}"] == 1)
        #expect(scraped["tutti_group_volume_percent{Radio}"] == 50 && scraped["tutti_group_volume_percent{default}"] == 100)
        #expect(scraped["tutti_group_queue_length{Radio}"] == 1 && (scraped["tutti_group_stream_position_seconds{default}"] ?? 0) > 1)
        house.stop()

        let a = try VirtualCapture(path: directory.file("a.wav")), b = try VirtualCapture(path: directory.file("b.wav"))
        func rms(_ capture: VirtualCapture, at time: Int64, seconds: Double = 0.4) -> Double {
            let start = Int(capture.frame(atEmissionTime: Double(time)))
            return SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: start..<min(capture.frameCount, start + Int(seconds * 48000)))
        }
        let aBefore = rms(a, at: volumeTime - 500_000_000), aAfterVolume = rms(a, at: volumeTime + 500_000_000), aAfterPause = rms(a, at: pauseTime + 600_000_000)
        let bBefore = rms(b, at: volumeTime - 500_000_000), bAfterVolume = rms(b, at: volumeTime + 500_000_000), bAfterPause = rms(b, at: pauseTime + 600_000_000)
        print("HTTP groups: a's card \(aBefore) → \(aAfterVolume) → \(aAfterPause); b's card \(bBefore) → \(bAfterVolume) → \(bAfterPause)")
        #expect(abs(aBefore - 0.0625) < 0.002 && abs(aAfterVolume - 0.0625) < 0.002 && abs(aAfterPause - 0.0625) < 0.002)
        #expect(abs(bBefore - 0.0625) < 0.002 && abs(bAfterVolume / bBefore - pow(10, -1.5)) < 0.005 && bAfterPause < 1e-4)
        // Each card played its group's tone: a 440 Hz, b 660 Hz (zero crossings over 0.4 s).
        func frequency(_ capture: VirtualCapture, at time: Int64) -> Double {
            let start = Int(capture.frame(atEmissionTime: Double(time)))
            var crossings = 0
            for frame in start..<(start + 19200) where capture.samples[frame * 2] < 0 && capture.samples[(frame + 1) * 2] >= 0 { crossings += 1 }
            return Double(crossings) / 0.4
        }
        #expect(abs(frequency(a, at: volumeTime - 500_000_000) - 440) < 5 && abs(frequency(b, at: volumeTime - 500_000_000) - 660) < 5)
    }
}
