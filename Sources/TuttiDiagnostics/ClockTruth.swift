import Foundation

/// Rooms' clock estimates against the truth, from the files `tutti speaker --clock-truth` writes
/// (one JSON line every 100 ms: true time, the estimate's error there, the bound the room
/// claimed). Splits a run's inter-room skew into the clocks' share (how far apart the rooms'
/// estimates of server time were) and the playout's (the rest), and checks each room's bound.
public struct ClockTruth: Sendable {
    public struct Sample: Sendable, Decodable {
        /// True time (the house's clock), ns.
        public var mono_ns: Int64
        /// The room's estimate of server time at `mono_ns`, minus `mono_ns`.
        public var error_ns: Int64
        /// The error bound the room claimed.
        public var bound_ns: Int64
    }

    /// Per room, its samples in time order.
    public var rooms: [String: [Sample]]

    public init(rooms: [String: [Sample]]) {
        self.rooms = rooms
    }

    /// Reads one file per room; a line that is not a sample (a partial last line) is skipped.
    public init(files: [String: String]) throws {
        var rooms: [String: [Sample]] = [:]
        let decoder = JSONDecoder()
        for (name, path) in files {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            rooms[name] = text.split(separator: "\n").compactMap { try? decoder.decode(Sample.self, from: Data($0.utf8)) }
        }
        self.rooms = rooms
    }

    public struct Summary: Sendable {
        /// Per 100 ms bucket in which every room has a sample: the spread of their errors, ns.
        public var skews: [Double]
        /// Per room: |error| at the 99th percentile, ns.
        public var worstErrors: [String: Double]
        /// Per room: the fraction of samples whose |error| was within the claimed bound.
        public var coverage: [String: Double]
        /// Per room: the median bound it claimed, ns.
        public var medianBounds: [String: Double] = [:]

        public func percentile(_ p: Double) -> Double { nearestRankPercentile(skews.sorted(), p) }
    }

    /// The summary over true times `range`.
    public func summary(over range: ClosedRange<Int64>) -> Summary {
        let bucket: Int64 = 100_000_000
        var byBucket: [Int64: [String: Int64]] = [:]
        var worst: [String: Double] = [:], coverage: [String: Double] = [:], medianBounds: [String: Double] = [:]
        for (name, samples) in rooms {
            let inRange = samples.filter { range.contains($0.mono_ns) }
            for sample in inRange { byBucket[sample.mono_ns / bucket, default: [:]][name] = sample.error_ns }
            let errors = inRange.map { Double(abs($0.error_ns)) }.sorted()
            worst[name] = nearestRankPercentile(errors, 99)
            coverage[name] = inRange.isEmpty ? .nan : Double(inRange.filter { abs($0.error_ns) <= $0.bound_ns }.count) / Double(inRange.count)
            medianBounds[name] = nearestRankPercentile(inRange.map { Double($0.bound_ns) }.sorted(), 50)
        }
        let skews = byBucket.keys.sorted().compactMap { key -> Double? in
            guard let errors = byBucket[key], errors.count == rooms.count, let low = errors.values.min(), let high = errors.values.max() else { return nil }
            return Double(high - low)
        }
        return Summary(skews: skews, worstErrors: worst, coverage: coverage, medianBounds: medianBounds)
    }
}
