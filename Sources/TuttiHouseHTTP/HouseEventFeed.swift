import Foundation
import Hummingbird
import HummingbirdWebSocket
import TuttiHouse
import TuttiProtocol

/// `GET /api/events`, a WebSocket: the house's status and queue, pushed as text frames
/// `{"event": "status", "status": {…}}` and `{"event": "queue", "queue": {…}}` whenever they
/// change, and both at once on connecting.
///
/// The feed looks at the house when the house says something changed (a command, a room's
/// status) and every `intervalNanoseconds` besides, for what only time changes. It sends a
/// report only when something a listener shows changed: not for the playhead moving on as
/// predicted, nor for the fill's every chunk. With rooms reporting twice a second, that is a
/// few messages a second per room.
enum HouseEventFeed {
    static func add(to router: Router<BasicWebSocketRequestContext>, house: House, intervalNanoseconds: Int64) {
        router.ws("/api/events") { inbound, outbound, _ in
            let (looks, look) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let token = await house.observeChanges { look.yield() }
            defer {
                house.stopObservingChanges(token)
                look.finish()
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                // What the listener sends is not read; its stream ends when it closes.
                group.addTask { for try await _ in inbound {} }
                group.addTask {
                    while true {
                        try await Task.sleep(nanoseconds: UInt64(intervalNanoseconds))
                        look.yield()
                    }
                }
                group.addTask {
                    var shown = ShownState()
                    look.yield()
                    for await _ in looks {
                        for message in await shown.changes(in: house) { try await outbound.write(.text(message)) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// What the listener was last sent.
    struct ShownState {
        var status: StatusReport?
        var queue: QueueReport?

        /// The messages that bring the listener up to date with the house.
        mutating func changes(in house: House) async -> [String] {
            var messages: [String] = []
            if case .success(let reply) = await house.perform(.status), let report = reply.status {
                if status.map({ Self.differs(report, from: $0) }) ?? true {
                    messages.append(#"{"event":"status","status":"# + ControlJSON.encode(reply) + "}")
                    status = report
                }
            }
            if case .success(let reply) = await house.perform(.queue), let report = reply.queue, report != queue {
                messages.append(#"{"event":"queue","queue":"# + ControlJSON.encode(reply) + "}")
                queue = report
            }
            return messages
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
