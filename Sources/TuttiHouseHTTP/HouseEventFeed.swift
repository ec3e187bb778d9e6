import Foundation
import Hummingbird
import HummingbirdWebSocket
import TuttiHouse
import TuttiProtocol

/// `GET /api/events`, a WebSocket: the house's groups, and each group's status and queue,
/// pushed as text frames `{"event": "groups", "groups": {…}}`,
/// `{"event": "status", "group": "NAME", "status": {…}}` and
/// `{"event": "queue", "group": "NAME", "queue": {…}}` whenever they change (each says which
/// group changed), and all at once on connecting.
///
/// One `HouseEventHub` looks at the house for all listeners, when the house says something
/// changed (a command, a room's status) and every `intervalNanoseconds` besides, for what only
/// time changes; each listener compares what it was shown with the hub's latest look. It sends a
/// report only when something a listener shows changed: not for the playhead moving on as
/// predicted, nor for the fill's every chunk. With rooms reporting twice a second, that is a
/// few messages a second per room.
enum HouseEventFeed {
    static func add(to router: Router<HouseRequestContext>, house: House, intervalNanoseconds: Int64) {
        let hub = HouseEventHub(house: house, intervalNanoseconds: intervalNanoseconds)
        router.ws("/api/events") { inbound, outbound, _ in
            let (id, snapshots) = hub.subscribe()
            defer { hub.unsubscribe(id) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                // What the listener sends is not read; its stream ends when it closes.
                group.addTask { for try await _ in inbound {} }
                group.addTask {
                    var shown = ShownState()
                    for await snapshot in snapshots {
                        for message in shown.changes(in: snapshot) { try await outbound.write(.text(message)) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// What the listener was last sent.
    struct ShownState {
        var groups: GroupsReport?
        var statuses: [String: StatusReport] = [:]
        var queues: [String: QueueReport] = [:]

        /// The messages that bring the listener up to date with `snapshot`.
        mutating func changes(in snapshot: HouseEventHub.Snapshot) -> [String] {
            var messages: [String] = []
            let report = snapshot.groups
            if groups.map({ Self.steady($0) != Self.steady(report) }) ?? true {
                messages.append(#"{"event":"groups","groups":"# + ControlJSON.encode(ControlReply.groups(report)) + "}")
                groups = report
            }
            for group in snapshot.eachGroup {
                // Encoding a struct of one string cannot fail.
                let name = String(decoding: try! JSONEncoder().encode(GroupName(group: group.report.name)), as: UTF8.self).dropFirst().dropLast()
                if var status = group.status {
                    // Every status lists every room; the default group's carries them, so a room's
                    // half-second status does not resend every group's.
                    if !group.report.isDefault { status.rooms = [] }
                    if statuses[group.report.name].map({ Self.differs(status, from: $0) }) ?? true {
                        messages.append(#"{"event":"status","# + name + #","status":"# + ControlJSON.encode(ControlReply.status(status)) + "}")
                        statuses[group.report.name] = status
                    }
                }
                if let queue = group.queue, queue != queues[group.report.name] {
                    messages.append(#"{"event":"queue","# + name + #","queue":"# + ControlJSON.encode(ControlReply.queue(queue)) + "}")
                    queues[group.report.name] = queue
                }
            }
            let names = Set(report.groups.map(\.name))
            statuses = statuses.filter { names.contains($0.key) }
            queues = queues.filter { names.contains($0.key) }
            return messages
        }

        /// `"group": NAME`, JSON-escaped.
        private struct GroupName: Encodable { var group: String }

        /// The groups without what moves on by itself: their playheads.
        static func steady(_ report: GroupsReport) -> GroupsReport {
            var report = report
            for index in report.groups.indices { report.groups[index].positionSeconds = nil }
            return report
        }

        /// Whether `now` shows something that `shown`, carried forward in time, does not.
        static func differs(_ now: StatusReport, from shown: StatusReport) -> Bool {
            if steady(now) != steady(shown) { return true }
            // The playhead jumped (a seek, an edit) rather than moving on with time.
            guard let position = now.positionSeconds, let before = shown.positionSeconds else { return now.positionSeconds != shown.positionSeconds }
            let elapsed = now.state == "playing" ? Double(now.serverTimeNs - shown.serverTimeNs) / 1e9 : 0
            return abs(position - (before + elapsed)) > 0.25
        }

        /// The report without what moves on by itself: the time, the playhead, the rooms'
        /// buffers draining as it moves, and the fill's
        /// progress, which during a deep fill moves by minutes a second (kept to the second, it
        /// sent a status some 900 times a second); its value goes out with the next change.
        static func steady(_ report: StatusReport) -> StatusReport {
            var report = report
            report.serverTimeNs = 0
            report.positionSeconds = nil
            report.itemPositionSeconds = nil
            report.bufferedAheadSeconds = nil
            for index in report.rooms.indices {
                report.rooms[index].playheadSeconds = nil
                report.rooms[index].sentSeconds = 0
                // Measured from the house's playhead, so it drains by itself; the room's next
                // status (its sync error) carries it, twice a second.
                report.rooms[index].bufferSeconds = nil
            }
            return report
        }
    }
}
