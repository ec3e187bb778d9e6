import Foundation
import NIOCore
import TuttiCore
import TuttiMedia
import TuttiNet
import TuttiPlayback

/// A refused command: one line saying why.
struct ControlError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The control commands (`tutti ctl …`), as JSON objects `{"command": …, …}`. Replies are JSON
/// objects; a refusal is `{"error": "…"}`.
///
/// Commands that change the playing queue (`seek`, `next`, `queue-add`, `queue-remove`,
/// `queue-move`) are answered once the engine has applied them, with where the stream was cut.
extension House {
    /// A reply to a control request: called once, on the house's loop.
    typealias Reply = (_ ok: Bool, _ json: String) -> Void
    private typealias Respond = (Result<[String: Any], ControlError>) -> Void

    func control(_ json: String, reply: @escaping Reply) {
        loop.preconditionInEventLoop()
        let respond: Respond = { result in
            switch result {
            case .success(let object): reply(true, Self.encode(object))
            case .failure(let error): reply(false, Self.encode(["error": error.message]))
            }
        }
        do {
            guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
                  let command = object["command"] as? String else {
                throw ControlError("request is not a JSON object with a \"command\"")
            }
            try perform(command, object, respond)
        } catch let error as ControlError {
            respond(.failure(error))
        } catch {
            respond(.failure(ControlError("\(error)")))
        }
    }

    static func encode(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func perform(_ command: String, _ request: [String: Any], _ respond: @escaping Respond) throws {
        if let reply = try performAtOnce(command, request, respond) { respond(.success(reply)) }
    }

    /// Performs `command`; returns the reply, or nil when `respond` will be called later.
    private func performAtOnce(_ command: String, _ request: [String: Any], _ respond: @escaping Respond) throws -> [String: Any]? {
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
            queueTags = files.map { _ in makeTag() }
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
            guard let item = currentItem, item.index >= 0 else { throw ControlError("nothing is playing") }
            let time = MediaTime(seconds: target)
            editPlayingQueue({ $0.seek(to: time, completion: $1) }, respond) { [self] action in
                guard let action else {
                    // Production had ended (the end is about to be heard): a new stream.
                    try startPlaying(item: item.index, offset: time)
                    return ["seeked": target, "item": item.index]
                }
                return cutReport(action).merging(["seeked": target, "item": item.index]) { $1 }
            }
            return nil
        case "next":
            guard let item = currentItem, item.index >= 0 else { throw ControlError("nothing is playing") }
            editPlayingQueue({ $0.advanceToNextItem(completion: $1) }, respond) { [self] action in
                guard let action else {
                    guard item.index + 1 < state.queue.count else {
                        stopStream()
                        return ["stopped": true]
                    }
                    try startPlaying(item: item.index + 1)
                    return ["item": item.index + 1]
                }
                if case .cut(_, nil, _) = action { return cutReport(action).merging(["stopped": true]) { $1 } }
                if case .cut(_, let restart?, _) = action { return cutReport(action).merging(["item": restart.index]) { $1 } }
                return cutReport(action)
            }
            return nil
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
            queueTags.insert(makeTag(), at: at)
            saveState()
            queueEdited(respond, reply: ["added": at])
            return nil
        case "queue-remove":
            guard let index = request["index"] as? Int, state.queue.indices.contains(index) else {
                throw ControlError("no queue item \(request["index"].map { "\($0)" } ?? "?") (the queue has \(state.queue.count))")
            }
            state.queue.remove(at: index)
            queueTags.remove(at: index)
            saveState()
            queueEdited(respond, reply: ["removed": index])
            return nil
        case "queue-move":
            guard let from = request["from"] as? Int, state.queue.indices.contains(from) else {
                throw ControlError("no queue item \(request["from"].map { "\($0)" } ?? "?") (the queue has \(state.queue.count))")
            }
            guard let to = request["to"] as? Int, state.queue.indices.contains(to) else {
                throw ControlError("queue position \(request["to"].map { "\($0)" } ?? "?") is out of range 0…\(state.queue.count - 1)")
            }
            state.queue.insert(state.queue.remove(at: from), at: to)
            queueTags.insert(queueTags.remove(at: from), at: to)
            saveState()
            queueEdited(respond, reply: ["moved": from, "to": to])
            return nil
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

    /// The item heard now, its `index` its position in the queue (-1 if it has been removed).
    var currentItem: QueueItemReport? {
        guard var item = stream?.engine?.outcome(atFrame: playhead()) else { return nil }
        item.index = queueTags.firstIndex(of: item.tag) ?? -1
        return item
    }

    private func seconds(_ frame: Int64) -> Double { Double(frame) / Double(sampleRate) }

    /// Hands `edit` to the playing stream's engine and answers, on the loop, with `answer` of
    /// what the engine did (nil: production had ended, or nothing plays).
    private func editPlayingQueue(_ edit: (QueueProducer, @escaping QueueProducer.EditCompletion) -> Void, _ respond: @escaping Respond,
                                  answer: @escaping (QueueEditPlan.Action?) throws -> [String: Any]) {
        let finish = NIOLoopBound((respond, answer), eventLoop: loop)
        let loop = self.loop
        let streamID = stream?.id
        let completion: QueueProducer.EditCompletion = { action in
            loop.execute { [weak self] in
                let (respond, answer) = finish.value
                guard let self, self.stream?.id == streamID else {
                    // A newer command replaced the stream before this edit reached it.
                    return respond(.failure(ControlError("superseded: another command replaced the stream before this one took effect")))
                }
                do {
                    respond(.success(try answer(action)))
                } catch let error as ControlError {
                    respond(.failure(error))
                } catch {
                    respond(.failure(ControlError("\(error)")))
                }
            }
        }
        guard let engine = stream?.engine else { return completion(nil) }
        edit(engine, completion)
    }

    /// After an edit of `state.queue`: the engine takes the edited queue; audio already sent is
    /// flushed from the first frame the edit changes.
    private func queueEdited(_ respond: @escaping Respond, reply: [String: Any]) {
        let entries = queueEntries
        editPlayingQueue({ engine, completion in engine.edit({ $0 = entries }, completion: completion) }, respond) { [self] action in
            var report = reply.merging(["queue": state.queue.count]) { $1 }
            if let action { report.merge(cutReport(action)) { $1 } }
            return report
        }
    }

    /// Where an edit cut the stream: `flush` "from" with the timeline second and how far ahead
    /// of the playhead (and whether that is beyond the seamless margin), or "none".
    private func cutReport(_ action: QueueEditPlan.Action) -> [String: Any] {
        guard case .cut(let frame, _, _) = action else { return ["flush": "none"] }
        let ahead = frame - playhead()
        let margin = frames(configuration.flushMarginNanoseconds)
        var report: [String: Any] = ["flush": "from", "fromSeconds": seconds(frame), "aheadSeconds": seconds(ahead), "seamless": ahead >= margin]
        if ahead < margin {
            let reason = "the change takes effect \(String(format: "%.2f", seconds(ahead))) s ahead of the playhead; a seamless flush needs \(String(format: "%.2f", seconds(margin))) s"
            report["reason"] = reason
        }
        return report
    }

    private func queueReport() -> [[String: Any]] {
        let items = stream?.engine?.outcomes ?? []
        let current = currentItem?.index
        return state.queue.enumerated().map { index, path in
            var entry: [String: Any] = ["index": index, "path": path, "current": index == current]
            if let info = items.last(where: { $0.tag == queueTags[index] })?.info {
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
