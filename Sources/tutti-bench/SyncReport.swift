import Foundation

/// What `tutti-bench sync` measured, as printed and as its `--json`.
struct SyncReport: Encodable {
    struct Percentiles: Encodable {
        var p50: Double
        var p99: Double
        var max: Double
    }

    /// The play command and when the house said it would be heard, on this machine's monotonic
    /// clock (the house's too).
    struct Start: Encodable {
        var commandTime: Int64
        var announcedTime: Int64
        /// How long the house waited for its rooms before it anchored the start.
        var waitedMs: Int
        /// The largest amplifier latency among the rooms: the house starts that much later.
        var largestLatencyMs: Double
    }

    struct Room: Encodable {
        var name: String
        var clockOffsetMs: Double
        var clockDriftPPM: Double
        var deviceDriftPPM: Double
        var latencyMs: Double
        /// When the room's first frame was heard, after the play command and after the time the
        /// house announced.
        var heardAfterCommandMs: Double?
        var heardAfterAnnouncedMs: Double?
        var fillRate: Double?
        var underruns: Int
        var discontinuities: Int
        var unmatchedCheckpoints: Int
        var cpuPercent: Double
        var peakMB: Double
        /// The room's clock estimate against the truth (`--clock-truth`): its error's 99th
        /// percentile, and the fraction of samples its reported bound covered.
        var clockErrorP99Microseconds: Double?
        var boundCoverage: Double?
        /// The median of the bound the room reported on its clock, µs.
        var boundMedianMicroseconds: Double?
    }

    var speakers: Int
    var seconds: Double
    var network: String
    var outage: String?
    var checkpoints: Int
    /// Inter-room skew of what the sound cards emitted, µs.
    var skew: Percentiles
    /// Whether play was pressed the moment the rooms were listed (`--cold`), and then the skew
    /// from 10 s of clock history on.
    var cold = false
    var skewAfterHistory: Percentiles?
    /// The spread of the rooms' clock estimates' true errors, µs: the clocks' share of the skew.
    var clockSkew: Percentiles?
    var start: Start?
    var rooms: [Room]
    var serverCPUPercent: Double
    var serverPeakMB: Double
    var proxiesCPUPercent: Double
    var workDirectory: String
    var targets: [SyncTargets.Result]?

    var text: String {
        func f(_ value: Double?, _ format: String) -> String { value.map { String(format: format, $0) } ?? "-" }
        var out = "tutti-bench sync: \(speakers) rooms, \(String(format: "%.1f", seconds)) s of music, \(network)"
        out += outage.map { ", outage \($0)\n" } ?? "\n"
        out += String(format: "inter-room skew (µs, %d checkpoints):  p50 %.1f   p99 %.1f   max %.1f\n", checkpoints, skew.p50, skew.p99, skew.max)
        if cold {
            out += skewAfterHistory.map { String(format: "  from 10 s of clock history on:  p50 %.1f   p99 %.1f   max %.1f\n", $0.p50, $0.p99, $0.max) }
                ?? "  from 10 s of clock history on: nothing was heard\n"
        }
        if let clockSkew {
            out += String(format: "clock estimates alone (spread of their true errors, µs):  p50 %.1f   p99 %.1f\n", clockSkew.p50, clockSkew.p99)
        }
        let rows = rooms.map { room in
            [room.name, f(room.clockOffsetMs, "%+.1f ms"), f(room.clockDriftPPM, "%+.0f ppm"), f(room.deviceDriftPPM, "%+.0f ppm"),
             f(room.latencyMs, "%.0f ms"), f(room.heardAfterCommandMs, "%.1f ms"), f(room.fillRate, "%.0f×"),
             "\(room.underruns)/\(room.discontinuities)/\(room.unmatchedCheckpoints)",
             f(room.clockErrorP99Microseconds, "%.1f µs"), f(room.boundMedianMicroseconds, "±%.0f µs"), f(room.boundCoverage.map { $0 * 100 }, "%.1f %%"),
             f(room.cpuPercent, "%.1f %%"), f(room.peakMB, "%.0f MB")]
        }
        out += Format.table(header: ["room", "clock", "drift", "card drift", "latency", "start", "fill", "faults",
                                     "clock error p99", "bound", "covers", "cpu", "RSS"], rows: rows)
        out += "(clock: its offset from the house's; faults: underruns/discontinuities/unmatched checkpoints; bound: the median of the clock error bound the room reported, and how often it covered the true error)\n"
        out += String(format: "server: %.2f%% of a core, %.1f MB peak RSS; proxies (in tutti-bench): %.2f%%\n", serverCPUPercent, serverPeakMB, proxiesCPUPercent)
        if let start {
            out += String(format: "start: the house waited %d ms for its rooms and announced the first frame %.1f ms after the command\n",
                          start.waitedMs, Double(start.announcedTime - start.commandTime) / 1e6)
        }
        out += "captures and logs: \(workDirectory)\n"
        return out
    }
}
