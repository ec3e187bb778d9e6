import TuttiCore

/// What a home network does to the packets between the house and a room, one model per kind of
/// trouble, for both the simulated house (`LinkModel.network`) and the real proxy
/// (`ImpairmentProxy.Impairment.network`): the same named models, seeded, so a sweep over them
/// compares clock estimators on the same draws (`tutti-bench sweep`, `tutti-bench sync
/// --network`).
///
/// Each direction has a base delay (the path's floor), a jitter distribution above it, and
/// optionally coarse timers, Wi-Fi power save and a step of the floor (a route change).
/// Datagrams may also queue behind the stream's burst in a shared network queue.
public struct NetworkModel: Sendable, Equatable {
    public enum Jitter: Sendable, Equatable {
        /// Uniform in 0 ..< max.
        case uniform(maxNanoseconds: Int64)
        /// Lomax (Pareto type II): `scale × (U^(−1/alpha) − 1)`, capped: heavy-tailed queueing.
        case pareto(alpha: Double, scaleNanoseconds: Double, capNanoseconds: Int64)
    }

    /// A route change: from `atNanoseconds` after the link starts, the floor moves by `byNanoseconds`.
    public struct FloorStep: Sendable, Equatable {
        public var atNanoseconds: Int64
        public var byNanoseconds: Int64
        public init(atNanoseconds: Int64, byNanoseconds: Int64) {
            self.atNanoseconds = atNanoseconds
            self.byNanoseconds = byNanoseconds
        }
    }

    public struct Direction: Sendable, Equatable {
        public var baseDelayNanoseconds: Int64 = 1_000_000
        public var jitter: Jitter = .uniform(maxNanoseconds: 1_000_000)
        /// Packets are delivered on a timer of this period (a coarse sleep), 0 for exact.
        public var timerTickNanoseconds: Int64 = 0
        /// Wi-Fi power save: this fraction of packets waits for the next beacon (every 102.4 ms)
        /// and 1–3 ms more.
        public var powerSaveFraction: Double = 0
        public var floorStep: FloorStep?
        public init() {}

        /// One packet's delay, sent `elapsed` after the link started. `phase` places this
        /// direction's beacon and timer grids.
        public func delay(elapsed: Int64, phase: Int64, random: inout SplitMix64) -> Int64 {
            var delay = baseDelayNanoseconds
            if let step = floorStep, elapsed >= step.atNanoseconds { delay += step.byNanoseconds }
            switch jitter {
            case .uniform(let maximum):
                if maximum > 0 { delay += Int64(random.next() % UInt64(maximum)) }
            case .pareto(let alpha, let scale, let cap):
                let u = max(random.nextUnitInterval(), 1e-12)
                delay += min(cap, Int64(scale * (pow(u, -1 / alpha) - 1)))
            }
            if powerSaveFraction > 0, random.nextUnitInterval() < powerSaveFraction {
                let beacon: Int64 = 102_400_000
                let sinceBeacon = (elapsed + delay + phase) % beacon
                delay += beacon - sinceBeacon + 1_000_000 + Int64(random.next() % 2_000_000)
            }
            if timerTickNanoseconds > 0 {
                let due = elapsed + delay + phase
                let remainder = due % timerTickNanoseconds
                if remainder != 0 { delay += timerTickNanoseconds - remainder }
            }
            return max(0, delay)
        }
    }

    public var name: String
    /// House to room, and room to house.
    public var toRoom = Direction()
    public var toHouse = Direction()
    /// Datagrams wait behind the stream's bytes in a network queue of at most this many bytes
    /// (a Wi-Fi access point's), draining at the link's rate; 0 for separate queues.
    public var sharedQueueBytes = 0
    /// The rate that shared queue drains at, through `ImpairmentProxy` (the simulated house
    /// takes its link's, `LinkModel.bytesPerSecond`): 50 Mbit/s, a good Wi-Fi link.
    public var queueBytesPerSecond: Double = 6_250_000

    public init(name: String) { self.name = name }

    /// The same model with both floors at `base` (each room's path has its own length).
    public func withBaseDelay(_ base: Int64) -> NetworkModel {
        var model = self
        model.toRoom.baseDelayNanoseconds = base
        model.toHouse.baseDelayNanoseconds = base
        return model
    }

    /// The named models, in sweep order.
    public static let all: [NetworkModel] = [uniform, pareto, coarseTimers, coarseTimers4ms, powerSave, floorStep, oneWayStep, asymmetric, burstQueueing]
    public static var names: [String] { all.map(\.name) }
    public static func named(_ name: String) -> NetworkModel? { all.first { $0.name == name } }

    /// Uniform jitter of up to 2 ms each way.
    public static var uniform: NetworkModel {
        var model = NetworkModel(name: "uniform")
        model.toRoom.jitter = .uniform(maxNanoseconds: 2_000_000)
        model.toHouse.jitter = .uniform(maxNanoseconds: 2_000_000)
        return model
    }

    /// Heavy-tailed queueing each way: Lomax, alpha 1.5, scale 1 ms (median 0.6 ms, one packet in
    /// a hundred over 20 ms), capped at 1 s.
    public static var pareto: NetworkModel {
        var model = NetworkModel(name: "pareto")
        model.toRoom.jitter = .pareto(alpha: 1.5, scaleNanoseconds: 1_000_000, capNanoseconds: 1_000_000_000)
        model.toHouse.jitter = .pareto(alpha: 1.5, scaleNanoseconds: 1_000_000, capNanoseconds: 1_000_000_000)
        return model
    }

    /// A relay whose timers fire on a 1 ms grid (as `tutti proxy` on a coarse kernel), with
    /// 0.2 ms of jitter.
    public static var coarseTimers: NetworkModel {
        var model = NetworkModel(name: "coarse-timers")
        for direction in [\NetworkModel.toRoom, \.toHouse] {
            model[keyPath: direction].jitter = .uniform(maxNanoseconds: 200_000)
            model[keyPath: direction].timerTickNanoseconds = 1_000_000
        }
        return model
    }

    /// A relay whose timers fire on a 4 ms grid (a busy router's, or a kernel at 250 Hz), with
    /// 0.2 ms of jitter.
    public static var coarseTimers4ms: NetworkModel {
        var model = coarseTimers
        model.name = "coarse-timers-4ms"
        model.toRoom.timerTickNanoseconds = 4_000_000
        model.toHouse.timerTickNanoseconds = 4_000_000
        return model
    }

    /// Wi-Fi power save: a third of the packets to the room wait for the next beacon (tens of
    /// ms); 0.5 ms of jitter each way otherwise.
    public static var powerSave: NetworkModel {
        var model = NetworkModel(name: "power-save")
        model.toRoom.jitter = .uniform(maxNanoseconds: 500_000)
        model.toHouse.jitter = .uniform(maxNanoseconds: 500_000)
        model.toRoom.powerSaveFraction = 1.0 / 3
        return model
    }

    /// A route change 20 s in: the floor rises 2 ms each way (an estimate anchored to the old,
    /// lower points must not tilt).
    public static var floorStep: NetworkModel {
        var model = NetworkModel(name: "floor-step")
        model.toRoom.jitter = .uniform(maxNanoseconds: 500_000)
        model.toHouse.jitter = .uniform(maxNanoseconds: 500_000)
        model.toRoom.floorStep = FloorStep(atNanoseconds: 20_000_000_000, byNanoseconds: 2_000_000)
        model.toHouse.floorStep = FloorStep(atNanoseconds: 20_000_000_000, byNanoseconds: 2_000_000)
        return model
    }

    /// A route change on one way only, 20 s in: the way to the room gets 4 ms longer. No two-way
    /// measurement can tell that from the clocks moving 2 ms apart, but monotonic clocks do not
    /// step: the estimator takes a step of the round-trip floor for asymmetry and carries the
    /// offset on (`ClockEstimator.asymmetryNanoseconds`).
    public static var oneWayStep: NetworkModel {
        var model = NetworkModel(name: "one-way-step")
        model.toRoom.jitter = .uniform(maxNanoseconds: 500_000)
        model.toHouse.jitter = .uniform(maxNanoseconds: 500_000)
        model.toRoom.floorStep = FloorStep(atNanoseconds: 20_000_000_000, byNanoseconds: 4_000_000)
        return model
    }

    /// Asymmetric paths: little jitter to the house (0.3 ms uniform), heavy-tailed jitter to
    /// the room (Lomax, alpha 1.5, scale 2 ms), on the same floor.
    public static var asymmetric: NetworkModel {
        var model = NetworkModel(name: "asymmetric")
        model.toHouse.jitter = .uniform(maxNanoseconds: 300_000)
        model.toRoom.jitter = .pareto(alpha: 1.5, scaleNanoseconds: 2_000_000, capNanoseconds: 1_000_000_000)
        return model
    }

    /// The deep-buffer fill shares the access point's queue (256 KiB) with the clock-sync
    /// datagrams, which wait behind it: up to 42 ms at 50 Mbit/s while the house fills.
    public static var burstQueueing: NetworkModel {
        var model = NetworkModel(name: "burst-queueing")
        model.toRoom.jitter = .uniform(maxNanoseconds: 500_000)
        model.toHouse.jitter = .uniform(maxNanoseconds: 500_000)
        model.sharedQueueBytes = 256 << 10
        return model
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
