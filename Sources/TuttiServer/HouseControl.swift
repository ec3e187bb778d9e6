import Foundation
import TuttiCore
import TuttiMedia
import TuttiNet

/// A refused command: one line saying why.
struct ControlError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The control commands (`tutti ctl …`), as JSON objects `{"command": …, …}`. Replies are JSON
/// objects; a refusal is `{"error": "…"}`.
extension House {
    func control(_ json: String) -> (ok: Bool, json: String) {
        loop.preconditionInEventLoop()
        let reply: [String: Any]
        do {
            guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
                  let command = object["command"] as? String else {
                throw ControlError("request is not a JSON object with a \"command\"")
            }
            reply = try perform(command, object)
        } catch let error as ControlError {
            return (false, Self.encode(["error": error.message]))
        } catch {
            return (false, Self.encode(["error": "\(error)"]))
        }
        return (true, Self.encode(reply))
    }

    static func encode(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func perform(_ command: String, _ request: [String: Any]) throws -> [String: Any] {
        switch command {
        case "play":
            guard let files = request["files"] as? [String], !files.isEmpty else { throw ControlError("play needs at least one file") }
            try checkReadable(files)
            if let names = request["rooms"] as? [String], !names.isEmpty {
                let unknown = names.filter { name in !rooms.values.contains { $0.name == name } }
                if !unknown.isEmpty { throw ControlError("no such room: \(unknown.joined(separator: ", ")) (connected: \(roomNames))") }
                state.group = names
            } else {
                state.group = nil
            }
            state.queue = files
            saveState()
            try startPlaying(item: 0)
            return ["playing": files.count, "rooms": groupRooms.map(\.name), "startsInMs": startsInMilliseconds]
        case "pause":
            guard let stream, isPlaying else { throw ControlError("nothing is playing") }
            let time = now + configuration.pauseDelayNanoseconds
            let frame = stream.schedule.position(atServer: time)?.frame ?? playhead()
            apply(TimelineAnchor(timelineFrame: frame, serverTime: time, isPlaying: false))
            return ["paused": seconds(frame)]
        case "resume":
            guard let stream, !isPlaying, let anchor = stream.schedule.anchors.last else { throw ControlError("nothing is paused") }
            let time = now + configuration.startDelayNanoseconds + largestLatency
            apply(TimelineAnchor(timelineFrame: anchor.timelineFrame, serverTime: time, isPlaying: true))
            return ["resumed": seconds(anchor.timelineFrame), "startsInMs": startsInMilliseconds]
        case "seek":
            guard let target = request["seconds"] as? Double, target >= 0, target.isFinite else { throw ControlError("seek needs a non-negative number of seconds") }
            guard let item = currentItem else { throw ControlError("nothing is playing") }
            try startPlaying(item: item.index, offset: MediaTime(seconds: target))
            return ["seeked": target, "item": item.index]
        case "next":
            guard let item = currentItem else { throw ControlError("nothing is playing") }
            guard item.index + 1 < state.queue.count else {
                stopStream()
                return ["stopped": true]
            }
            try startPlaying(item: item.index + 1)
            return ["item": item.index + 1]
        case "rooms":
            return ["rooms": roomsReport()]
        case "join":
            let room = try room(named: request["room"])
            var group = state.group ?? rooms.values.map(\.name)
            if !group.contains(room.name) { group.append(room.name) }
            state.group = group
            saveState()
            pump(room)
            return ["joined": room.name]
        case "leave":
            let room = try room(named: request["room"])
            state.group = (state.group ?? rooms.values.map(\.name)).filter { $0 != room.name }
            saveState()
            if let id = room.streamID {
                send(.flush(.init(streamID: id, fromFrame: .min)), to: room)
                room.streamID = nil
            }
            return ["left": room.name]
        case "volume":
            let room = try room(named: request["room"])
            guard let percent = request["percent"] as? Int, (0...100).contains(percent) else { throw ControlError("volume needs a percentage from 0 to 100") }
            state.volumes[room.name] = percent
            saveState()
            send(.volume(.init(level: Self.gain(percent: percent), rampNanoseconds: 100_000_000)), to: room)
            return ["room": room.name, "volume": percent]
        case "queue":
            return ["items": queueReport(), "current": currentItem?.index ?? -1]
        case "queue-add":
            guard let file = request["file"] as? String else { throw ControlError("queue add needs a file") }
            try checkReadable([file])
            let at = (request["at"] as? Int) ?? state.queue.count
            guard (0...state.queue.count).contains(at) else { throw ControlError("queue position \(at) is out of range 0…\(state.queue.count)") }
            state.queue.insert(file, at: at)
            saveState()
            return try queueEdited(at: at, delta: 1)
        case "queue-remove":
            guard let index = request["index"] as? Int, state.queue.indices.contains(index) else {
                throw ControlError("no queue item \(request["index"].map { "\($0)" } ?? "?") (the queue has \(state.queue.count))")
            }
            if index == currentItem?.index {
                state.queue.remove(at: index)
                saveState()
                if index < state.queue.count { try startPlaying(item: index) } else { stopStream() }
                return ["removed": index, "flush": "hard", "reason": "the playing item was removed"]
            }
            state.queue.remove(at: index)
            saveState()
            return try queueEdited(at: index, delta: -1)
        case "status":
            return statusReport()
        default:
            throw ControlError("unknown command \(command)")
        }
    }

    /// Refuses files the house cannot open at all (a damaged file is found while decoding).
    private func checkReadable(_ files: [String]) throws {
        for file in files where !file.contains("://") && file != "-" && !file.hasPrefix("pipe:") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else { throw ControlError("\(file): no such file") }
            guard !isDirectory.boolValue else { throw ControlError("\(file): is a directory") }
            guard FileManager.default.isReadableFile(atPath: file) else { throw ControlError("\(file): permission denied") }
        }
    }

    private var roomNames: String {
        let names = rooms.values.map(\.name).sorted()
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }

    private func room(named value: Any?) throws -> RoomLink {
        guard let name = value as? String else { throw ControlError("which room?") }
        guard let room = rooms.values.first(where: { $0.name == name }) else { throw ControlError("no such room: \(name) (connected: \(roomNames))") }
        return room
    }

    private func startPlaying(item: Int, offset: MediaTime = .zero) throws {
        do { try startStream(item: item, offset: offset) } catch { throw ControlError("\(error)") }
    }

    private var startsInMilliseconds: Int {
        guard let anchor = stream?.schedule.anchors.last else { return 0 }
        return Int((anchor.serverTime - now) / 1_000_000)
    }

    var currentItem: QueueItemReport? { stream?.item(at: playhead()) }

    private func seconds(_ frame: Int64) -> Double { Double(frame) / Double(sampleRate) }

    /// After inserting (`delta` +1) or removing (−1) the queue item at `index`: the audio after
    /// the playing item is replaced by a flush from its timeline frame when that is far enough
    /// ahead of the playhead; otherwise the edit is refused as a flush-from and falls back to a
    /// hard flush (a new stream from the playhead, which may be heard as a short gap).
    private func queueEdited(at index: Int, delta: Int) throws -> [String: Any] {
        guard let stream, let current = currentItem else { return ["queue": state.queue.count] }
        let head = playhead()
        // Where the playing item sits in the edited queue.
        let playing = index <= current.index ? current.index + delta : current.index
        let boundary = stream.items.first { $0.index == current.index + 1 && $0.startFrame > current.startFrame }?.startFrame
        let frame = boundary ?? stream.producedEnd
        let margin = frames(configuration.flushMarginNanoseconds)
        stream.shiftItemIndices(atOrAfter: delta > 0 ? index : index + 1, by: delta)
        if frame - head < margin {
            let reason = "the change takes effect \(String(format: "%.2f", seconds(frame - head))) s ahead of the playhead; a seamless flush needs \(String(format: "%.2f", seconds(margin))) s"
            log("queue edit: flush-from refused: \(reason); hard flush")
            try startPlaying(item: playing, offset: MediaTime(frame: max(0, head - current.startFrame), sampleRate: sampleRate))
            return ["flush": "hard", "refused": "flush-from", "reason": reason]
        }
        do {
            if boundary != nil {
                try flush(from: frame, item: playing + 1, offset: .zero)
            } else {
                // The next item is not produced yet: production restarts inside the playing one.
                try flush(from: frame, item: playing, offset: MediaTime(frame: frame - current.startFrame, sampleRate: sampleRate))
            }
        } catch { throw ControlError("\(error)") }
        return ["flush": "from", "fromSeconds": seconds(frame), "aheadSeconds": seconds(frame - head)]
    }

    private func queueReport() -> [[String: Any]] {
        let items = stream?.items ?? []
        let current = currentItem?.index
        return state.queue.enumerated().map { index, path in
            var entry: [String: Any] = ["index": index, "path": path, "current": index == current]
            if let info = items.last(where: { $0.path == path })?.info {
                entry["title"] = info.displayTitle
                if let d = info.duration { entry["duration"] = d.seconds }
            }
            return entry
        }
    }

    func roomsReport() -> [[String: Any]] {
        let head = playhead()
        return rooms.values.sorted { $0.name < $1.name }.map { room in
            var entry: [String: Any] = ["name": room.name, "inGroup": inGroup(room), "volume": state.volumes[room.name] ?? 100,
                                        "latencyMs": Double(room.latencyNanoseconds) / 1e6]
            if let status = room.status {
                entry["state"] = "\(status.state)"
                entry["bufferSeconds"] = status.bufferedUntilFrame >= 0 ? max(0, seconds(status.bufferedUntilFrame - max(head, status.playheadFrame))) : 0
                entry["syncErrorMicroseconds"] = Double(status.syncErrorNanoseconds) / 1000
                entry["clockErrorMicroseconds"] = Double(status.clockErrorNanoseconds) / 1000
                entry["underruns"] = Int(status.underruns)
                if status.fillRate > 0 { entry["fillRate"] = Double(status.fillRate) }
                entry["playheadSeconds"] = status.playheadFrame >= 0 ? seconds(status.playheadFrame) : -1
            } else {
                entry["state"] = "connecting"
            }
            entry["sentSeconds"] = seconds(room.sentUntilFrame)
            return entry
        }
    }

    func statusReport() -> [String: Any] {
        var report: [String: Any] = ["server": configuration.name, "rooms": rooms.count, "queueLength": state.queue.count,
                                     "serverTimeNs": now]
        guard let stream else {
            report["state"] = "stopped"
            return report
        }
        let head = playhead()
        let ended = stream.endFrame.map { head >= $0 } ?? false
        report["state"] = ended ? "stopped" : isPlaying ? "playing" : "paused"
        report["stream"] = Int(stream.id)
        report["positionSeconds"] = seconds(head)
        report["bufferedAheadSeconds"] = seconds(max(0, stream.producedEnd - head))
        if let item = currentItem {
            report["item"] = item.index
            report["title"] = item.info?.displayTitle ?? item.path
            report["itemPositionSeconds"] = seconds(head - item.startFrame)
            if let d = item.info?.duration { report["itemDurationSeconds"] = d.seconds }
        }
        report["roomStates"] = roomsReport()
        return report
    }
}
