import Metrics
import Prometheus
import Synchronization
import TuttiHouse
import TuttiProtocol

/// `GET /metrics`: the house and its rooms in Prometheus's text format, through swift-metrics
/// with swift-prometheus's factory on a registry of the server's own (no process-wide
/// bootstrap, so two houses in one process keep apart).
///
/// Collected when scraped: the house's `status` report is read and the metrics set from it, so
/// they are as fresh as the rooms' last status (every half second) and cost nothing between
/// scrapes. A room that is gone loses its series. Units are Prometheus's base units: seconds,
/// and ratios rather than percentages, except the volume, which is the percentage users set.
///
/// Thread-safety: `scrape` may be called from any thread, concurrently.
final class HouseMetrics: Sendable {
    private let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let house: House
    private let state = Mutex(Series())

    init(house: House) {
        self.house = house
        factory = PrometheusMetricsFactory(registry: registry)
    }

    /// The metrics as they are now, in the text exposition format.
    func scrape() async -> String {
        guard case .success(let reply) = await house.perform(.status), let status = reply.status,
              case .success(let listed) = await house.perform(.groups), let groups = listed.groups else { return registry.emitToString() }
        let groupIDs = Dictionary(uniqueKeysWithValues: groups.groups.map { ($0.name, $0.id) })
        var statuses: [(GroupReport, StatusReport)] = []
        for group in groups.groups {
            if case .success(let reply) = await house.perform(.status, group: String(group.id)), let groupStatus = reply.status {
                statuses.append((group, groupStatus))
            }
        }
        state.withLock { series in
            series.update(from: status, groupIDs: groupIDs, factory: factory)
            series.update(groups: statuses, factory: factory)
        }
        return registry.emitToString()
    }

    /// The handles of every series, by room.
    private struct Series {
        var house: HouseSeries?
        var rooms: [String: RoomSeries] = [:]
        /// By group id and name: a renamed group is a new series.
        var groups: [String: GroupSeries] = [:]

        mutating func update(groups reports: [(GroupReport, StatusReport)], factory: PrometheusMetricsFactory) {
            let present = Set(reports.map { "\($0.0.id)/\($0.0.name)" })
            for (key, gone) in groups where !present.contains(key) {
                gone.destroy()
                groups[key] = nil
            }
            for (group, status) in reports {
                let key = "\(group.id)/\(group.name)"
                if groups[key] == nil { groups[key] = GroupSeries(group: group, factory: factory) }
                groups[key]!.update(from: group, status: status)
            }
        }

        mutating func update(from status: StatusReport, groupIDs: [String: UInt32], factory: PrometheusMetricsFactory) {
            if house == nil { house = HouseSeries(factory: factory) }
            house!.update(from: status)
            let present = Set(status.rooms.map(\.name))
            for (name, gone) in rooms where !present.contains(name) {
                gone.destroy()
                rooms[name] = nil
            }
            for report in status.rooms {
                if rooms[report.name] == nil { rooms[report.name] = RoomSeries(room: report.name, factory: factory) }
                rooms[report.name]!.update(from: report, groupIDs: groupIDs)
            }
        }
    }

    private struct HouseSeries {
        let rooms, playing, position, queueLength, bufferedAhead, fillRate, libraryTracks, libraryUnreadable: Metrics.Gauge

        init(factory: PrometheusMetricsFactory) {
            rooms = Metrics.Gauge(label: "tutti_house_rooms", factory: factory)
            playing = Metrics.Gauge(label: "tutti_house_playing", factory: factory)
            position = Metrics.Gauge(label: "tutti_house_stream_position_seconds", factory: factory)
            queueLength = Metrics.Gauge(label: "tutti_house_queue_length", factory: factory)
            bufferedAhead = Metrics.Gauge(label: "tutti_house_buffered_ahead_seconds", factory: factory)
            fillRate = Metrics.Gauge(label: "tutti_house_fill_rate", factory: factory)
            libraryTracks = Metrics.Gauge(label: "tutti_library_tracks", factory: factory)
            libraryUnreadable = Metrics.Gauge(label: "tutti_library_unreadable_files", factory: factory)
        }

        func update(from status: StatusReport) {
            rooms.record(status.rooms.count)
            playing.record(status.state == "playing" ? 1 : 0)
            position.record(status.positionSeconds ?? 0)
            queueLength.record(status.queueLength)
            bufferedAhead.record(status.bufferedAheadSeconds ?? 0)
            // How much faster than real time the rooms that have their whole stream got it.
            let rates = status.rooms.compactMap(\.fillRate)
            fillRate.record(rates.isEmpty ? 0 : rates.reduce(0, +) / Double(rates.count))
            libraryTracks.record(status.library?.tracks ?? 0)
            libraryUnreadable.record(status.library?.unreadable ?? 0)
        }
    }

    /// What one group plays: `tutti_group_*{group="ID",name="NAME"}`.
    private struct GroupSeries {
        let rooms, playing, position, queueLength, bufferedAhead, volume: Metrics.Gauge

        init(group: GroupReport, factory: PrometheusMetricsFactory) {
            let dimensions = [("group", String(group.id)), ("name", group.name)]
            rooms = Metrics.Gauge(label: "tutti_group_rooms", dimensions: dimensions, factory: factory)
            playing = Metrics.Gauge(label: "tutti_group_playing", dimensions: dimensions, factory: factory)
            position = Metrics.Gauge(label: "tutti_group_stream_position_seconds", dimensions: dimensions, factory: factory)
            queueLength = Metrics.Gauge(label: "tutti_group_queue_length", dimensions: dimensions, factory: factory)
            bufferedAhead = Metrics.Gauge(label: "tutti_group_buffered_ahead_seconds", dimensions: dimensions, factory: factory)
            volume = Metrics.Gauge(label: "tutti_group_volume_percent", dimensions: dimensions, factory: factory)
        }

        func update(from group: GroupReport, status: StatusReport) {
            rooms.record(group.rooms.count)
            playing.record(status.state == "playing" ? 1 : 0)
            position.record(status.positionSeconds ?? 0)
            queueLength.record(status.queueLength)
            bufferedAhead.record(status.bufferedAheadSeconds ?? 0)
            volume.record(group.volume ?? 0)
        }

        func destroy() {
            for gauge in [rooms, playing, position, queueLength, bufferedAhead, volume] { gauge.destroy() }
        }
    }

    private struct RoomSeries {
        let buffer, syncError, clockBound, volume, group, playing: Metrics.Gauge
        let underruns, reconnects: Metrics.Counter
        /// The counts already added to the counters: a room reports totals.
        var countedUnderruns = 0, countedReconnects = 0

        init(room: String, factory: PrometheusMetricsFactory) {
            let dimensions = [("room", room)]
            buffer = Metrics.Gauge(label: "tutti_room_buffer_seconds", dimensions: dimensions, factory: factory)
            syncError = Metrics.Gauge(label: "tutti_room_sync_error_seconds", dimensions: dimensions, factory: factory)
            clockBound = Metrics.Gauge(label: "tutti_room_clock_error_bound_seconds", dimensions: dimensions, factory: factory)
            volume = Metrics.Gauge(label: "tutti_room_volume_percent", dimensions: dimensions, factory: factory)
            // The group's id: a number, so a room that moves is one series whose value changes.
            group = Metrics.Gauge(label: "tutti_room_group", dimensions: dimensions, factory: factory)
            playing = Metrics.Gauge(label: "tutti_room_playing", dimensions: dimensions, factory: factory)
            underruns = Metrics.Counter(label: "tutti_room_underruns_total", dimensions: dimensions, factory: factory)
            reconnects = Metrics.Counter(label: "tutti_room_reconnects_total", dimensions: dimensions, factory: factory)
        }

        mutating func update(from report: RoomReport, groupIDs: [String: UInt32]) {
            buffer.record(report.bufferSeconds ?? 0)
            syncError.record((report.syncErrorMicroseconds ?? 0) / 1e6)
            clockBound.record((report.clockErrorMicroseconds ?? 0) / 1e6)
            volume.record(report.volume)
            if let id = groupIDs[report.group] { group.record(Int(id)) }
            playing.record(report.state == "playing" ? 1 : 0)
            add(report.underruns ?? 0, to: underruns, counted: &countedUnderruns)
            add(report.reconnects ?? 0, to: reconnects, counted: &countedReconnects)
        }

        /// Adds what `total` grew by; a total that fell (the speaker restarted and counts anew)
        /// all counts.
        private func add(_ total: Int, to counter: Metrics.Counter, counted: inout Int) {
            let growth = total >= counted ? total - counted : total
            if growth > 0 { counter.increment(by: growth) }
            counted = total
        }

        func destroy() {
            for gauge in [buffer, syncError, clockBound, volume, group, playing] { gauge.destroy() }
            underruns.destroy()
            reconnects.destroy()
        }
    }
}
