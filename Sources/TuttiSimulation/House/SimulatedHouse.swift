import Foundation
import NIOCore
import NIOEmbedded
import TuttiCore
import TuttiDevices
import TuttiDiagnostics
import TuttiMedia
import TuttiProtocol
import TuttiHouse
import TuttiSpeaker

/// A whole house in one process, on simulated time, from one seed: the real `House`, N real
/// rooms (`SpeakerClient`, `ClockSyncClient`, `Playout`, the chunk codec), each on a simulated
/// link with its own delay, jitter, loss and outages, each with its own clock offset and drift
/// and a simulated sound card with its own crystal error. Only time, sockets and sound cards are
/// simulated (docs/SIMULATION.md).
///
/// Everything runs as tasks of one `EmbeddedEventLoop` on the calling thread, in the order of
/// their virtual times, so a run is a function of its scenario: the same seed gives
/// bit-identical audio in every room. It measures what each card emitted against the true
/// timeline, and each room's true clock error beside the one it reports.
public enum SimulatedHouse {
    /// One room: its clock, its card, its acoustic latency and its link to the house.
    public struct Room: Sendable {
        public var name: String
        /// The room clock's offset from the house's at the start, and its rate error.
        public var clockOffsetNanoseconds: Int64
        public var clockDriftPPM: Double
        /// The sound card's crystal error.
        public var crystalDriftPPM: Double
        public var latencyNanoseconds: Int64 = 0
        public var link = LinkModel()
        /// True times at which the room's TCP connection to the house is reset (a router that
        /// restarts, a NAT that forgets). The room reconnects after `reconnectDelayNanoseconds`
        /// and resumes what it holds.
        public var connectionResets: [Int64] = []
        public var reconnectDelayNanoseconds: Int64 = 100_000_000

        public init(name: String, clockOffsetNanoseconds: Int64, clockDriftPPM: Double, crystalDriftPPM: Double) {
            self.name = name
            self.clockOffsetNanoseconds = clockOffsetNanoseconds
            self.clockDriftPPM = clockDriftPPM
            self.crystalDriftPPM = crystalDriftPPM
        }
    }

    public struct Scenario: Sendable {
        public var seed: UInt64
        public var rooms: [Room]
        /// What the house plays: files on this machine.
        public var music: [String]
        /// Simulated time from the rooms' connection to `play` (their clocks converge).
        public var warmUpNanoseconds: Int64 = 5_000_000_000
        /// Simulated time played after `play`.
        public var playNanoseconds: Int64
        /// Keep every room's emitted audio (for `SyncAnalysis`); off, only digests are kept.
        public var keepsAudio = true
        /// The clock estimator every room runs (another than the envelope only to compare them).
        public var estimator: ClockEstimatorKind = .envelope
        /// More groups than the default one, each with its rooms (moved there before play) and
        /// its own music, played at the same time as `music` in the default group.
        public var groups: [Group] = []
        /// Rooms moved into a group while playing: at a time after `play`, room, group.
        public var moves: [Move] = []

        public struct Group: Sendable {
            public var name: String
            public var rooms: [String]
            public var music: [String]
            public init(name: String, rooms: [String], music: [String]) {
                self.name = name
                self.rooms = rooms
                self.music = music
            }
        }

        public struct Move: Sendable {
            public var afterPlayNanoseconds: Int64
            public var room: String
            public var group: String
            public init(afterPlayNanoseconds: Int64, room: String, group: String) {
                self.afterPlayNanoseconds = afterPlayNanoseconds
                self.room = room
                self.group = group
            }
        }

        public init(seed: UInt64, rooms: [Room], music: [String], playNanoseconds: Int64) {
            self.seed = seed
            self.rooms = rooms
            self.music = music
            self.playNanoseconds = playNanoseconds
        }

        /// `roomCount` rooms drawn from `seed`: clock offsets within ±1 s, clock drifts and
        /// crystal errors within ±100 ppm, links with 0.5–3 ms of delay and up to 3 ms of
        /// jitter each way; the first room's link goes down for `outageNanoseconds` a third of
        /// the way into the music.
        ///
        /// With a `network` model, each room's link follows it instead, on a floor drawn from
        /// 0.5–3 ms.
        public static func drawn(seed: UInt64, roomCount: Int, music: [String], playNanoseconds: Int64,
                                 outageNanoseconds: Int64 = 20_000_000_000, network: NetworkModel? = nil) -> Scenario {
            var random = SplitMix64(seed: seed)
            func uniform(_ range: ClosedRange<Double>) -> Double { range.lowerBound + random.nextUnitInterval() * (range.upperBound - range.lowerBound) }
            var rooms: [Room] = []
            for index in 0..<roomCount {
                var room = Room(name: "room\(index + 1)", clockOffsetNanoseconds: Int64(uniform(-1e9...1e9)),
                                clockDriftPPM: uniform(-100...100), crystalDriftPPM: uniform(-100...100))
                room.link.baseDelayNanoseconds = Int64(uniform(500_000...3_000_000))
                room.link.jitterNanoseconds = Int64(uniform(0...3_000_000))
                room.link.network = network?.withBaseDelay(room.link.baseDelayNanoseconds)
                rooms.append(room)
            }
            var scenario = Scenario(seed: seed, rooms: rooms, music: music, playNanoseconds: playNanoseconds)
            if roomCount > 0 && outageNanoseconds > 0 {
                let start = startTime + scenario.warmUpNanoseconds + playNanoseconds / 3
                scenario.rooms[0].link.outages = [start..<(start + outageNanoseconds)]
            }
            return scenario
        }
    }

    /// What one room did, measured against the truth.
    public struct RoomResult: Sendable {
        public var name: String
        /// SHA-256 of every sample the card emitted.
        public var digest: String
        public var framesEmitted: Int64
        /// Blocks the playout cut short because audio had not arrived, and its jumps.
        public var starvedBlocks: Int
        public var resyncs: Int
        /// The room's clock mapping against the truth, sampled every 100 ms of simulated time once it
        /// plays by it: the worst true error, and how often the error it reported covered it.
        public var worstClockErrorNanoseconds: Double
        public var reportedBoundCoverage: Double
        public var medianReportedBoundNanoseconds: Double
        /// The last sync error the room reported of itself.
        public var reportedSyncErrorNanoseconds: Int64
        public var problem: String
        /// What the card emitted, when the scenario keeps audio.
        public var capture: VirtualCapture?
    }

    public struct Result: Sendable {
        public var rooms: [RoomResult]
        public var simulatedNanoseconds: Int64
        public var wallSeconds: Double
        /// One line each, in order: what the house and the rooms logged.
        public var events: [String]
        /// Simulated seconds per wall second.
        public var speed: Double { Double(simulatedNanoseconds) / 1e9 / max(wallSeconds, 1e-9) }
    }

    /// Where the simulated clock starts: far enough from zero that a room clock 1 s behind
    /// reads positive times.
    public static let startTime: Int64 = 1_000_000_000_000

    /// Runs `scenario` on the calling thread and returns what every room emitted.
    public static func run(_ scenario: Scenario, house configuration: House.Configuration = House.Configuration()) throws -> Result {
        let wallStart = Date()
        let loop = EmbeddedEventLoop()
        loop.advanceTime(to: .uptimeNanoseconds(UInt64(startTime)))
        let clock = SimulatedClock(loop: loop)
        let events = EventLog()
        var houseConfiguration = configuration
        houseConfiguration.stepsProductionOnLoop = true
        houseConfiguration.stateDirectory = nil
        // The rooms are the house's own, admitted ahead (as after a first `tutti ctl admit`):
        // every connection still runs the handshake, sealed records and tagged clock sync.
        let identities = scenario.rooms.map { _ in IdentityKey.random() }
        houseConfiguration.admittedSpeakers += identities.map(\.publicKey)
        let house = House(configuration: houseConfiguration, loop: loop, clock: clock, log: { events.append("house: \($0)") })
        let format = AudioFormat(sampleRate: houseConfiguration.sampleRate, channelCount: houseConfiguration.channelCount)
        // The rooms' chunks decode on a second core, ahead of need: the same samples as decoding
        // them on this thread, so the run stays deterministic.
        let decodeWorker = ChunkDecodeWorker(name: "tutti-sim-decode")
        defer { decodeWorker.stop() }
        var rooms: [SimulatedRoom] = []
        for (index, spec) in scenario.rooms.enumerated() {
            let seed = scenario.seed ^ (UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15)
            rooms.append(try SimulatedRoom(spec: spec, index: index, seed: seed, identity: identities[index], format: format, house: house, clock: clock, loop: loop,
                                           keepsAudio: scenario.keepsAudio, estimator: scenario.estimator, events: events, decodeWorker: decodeWorker))
        }
        for room in rooms {
            for time in room.spec.connectionResets {
                loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(time))) { room.resetConnection() }
            }
        }
        loop.advanceTime(by: .nanoseconds(scenario.warmUpNanoseconds))
        func control(_ command: ControlCommand, group: String? = nil) {
            house.control(ControlRequest(command, group: group)) { result in
                if case .failure(let refusal) = result { events.append("house: \(command.name) refused: \(refusal)") }
            }
        }
        for group in scenario.groups {
            control(.groupCreate(name: group.name))
            for room in group.rooms { control(.join(room: room), group: group.name) }
        }
        control(.play(files: scenario.music))
        for group in scenario.groups { control(.play(files: group.music), group: group.name) }
        let playTime = clock.now()
        for move in scenario.moves {
            loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(playTime + move.afterPlayNanoseconds))) {
                control(.join(room: move.room), group: move.group)
            }
        }
        let end = clock.now() + scenario.playNanoseconds
        while clock.now() < end {
            loop.advanceTime(by: .nanoseconds(min(100_000_000, end - clock.now())))
            for room in rooms { room.sampleClockTruth(now: clock.now()) }
        }
        for room in rooms { room.card.stop() }
        let results = rooms.map { $0.result(format: format) }
        for room in rooms { room.close() }
        return Result(rooms: results, simulatedNanoseconds: scenario.warmUpNanoseconds + scenario.playNanoseconds,
                      wallSeconds: Date().timeIntervalSince(wallStart), events: events.lines)
    }
}

/// The lines the simulated processes log, in order.
final class EventLog: @unchecked Sendable {
    private(set) var lines: [String] = []
    func append(_ line: String) { lines.append(line) }
}

/// A non-Sendable value that only the simulation's one thread touches, handed to APIs that
/// require `Sendable` closures because their real callers are threads.
struct LoopConfined<Value>: @unchecked Sendable {
    let value: Value
}

/// One simulated room: the real speaker connection and playout, a simulated card, and its
/// links to the house.
final class SimulatedRoom {
    /// How far ahead of the DAC a simulated card pulls each block, as a real room's ring lead.
    static let cardLeadNanoseconds: Int64 = 50_000_000
    let spec: SimulatedHouse.Room
    let clock: SkewedClock
    let playout: Playout
    let client: SpeakerClient
    let card: SimulatedSoundCard
    private var channels: [EmbeddedChannel]
    private var trueErrors: [Double] = []
    private let house: House
    private let loop: EmbeddedEventLoop
    private let seed: UInt64
    private let address: SocketAddress
    private var connections = 0
    /// The path's shared network queues, to the house and to the room (`NetworkModel.sharedQueueBytes`).
    private let queues = (toHouse: LinkQueue(), toRoom: LinkQueue())
    private var covered = 0
    private var bounds: [Double] = []

    init(spec: SimulatedHouse.Room, index: Int, seed: UInt64, identity: IdentityKey, format: AudioFormat, house: House, clock houseClock: SimulatedClock,
         loop: EmbeddedEventLoop, keepsAudio: Bool, estimator: ClockEstimatorKind, events: EventLog, decodeWorker: ChunkDecodeWorker) throws {
        self.spec = spec
        clock = SkewedClock(base: houseClock, offsetNanoseconds: spec.clockOffsetNanoseconds, driftPPM: spec.clockDriftPPM,
                            anchor: SimulatedHouse.startTime)
        let inputs = PlayoutInputs()
        playout = Playout(inputs: inputs, format: format, blockFrames: 480, latencyNanoseconds: spec.latencyNanoseconds, localClock: clock,
                          decodeWorker: decodeWorker)
        let name = spec.name
        playout.onEvent = { events.append("\(name): \($0)") }
        let confined = LoopConfined(value: playout)
        var configuration = SpeakerClient.Configuration(serverHost: "house", serverPort: 4953, name: spec.name)
        configuration.latencyNanoseconds = spec.latencyNanoseconds
        // The card pulls each block this far ahead of the DAC (`SimulatedSoundCard`).
        configuration.outputLeadNanoseconds = SimulatedRoom.cardLeadNanoseconds + Int64(playout.blockFrames) * 1_000_000_000 / Int64(format.sampleRate)
        configuration.clockSync.estimator = estimator
        configuration.clockSync.seed = seed ^ 0xA54F_F53A_5F1D_36F1
        configuration.identity = identity
        configuration.membership = HouseMembership(house: house.configuration.identity.publicKey)
        client = SpeakerClient(configuration: configuration, inputs: inputs, report: { confined.value.report }, clock: clock,
                               serverAddress: try SocketAddress(ipAddress: "10.0.0.1", port: 4953), log: { events.append("\(name): \($0)") })
        self.house = house
        self.loop = loop
        self.seed = seed
        address = try SocketAddress(ipAddress: "10.0.0.\(index + 2)", port: 40000)
        // The room's clock-sync datagrams and its TCP connection, each over the room's link.
        let houseDatagrams = EmbeddedChannel(handlers: [DatagramArrivalStamper(clock: houseClock),
                                                        ClockSyncResponder(clock: houseClock, sessions: house.clockSessions, seed: seed ^ 0x3C6E_F372_FE94_F82B)], loop: loop)
        let roomDatagrams = EmbeddedChannel(loop: loop)
        try SimulatedLink.join(roomDatagrams, houseDatagrams, model: spec.link, seed: seed ^ 0xD1B5_4A32_D192_ED03, isStream: false, loop: loop, queues: queues)
        for channel in [houseDatagrams, roomDatagrams] { try channel.connect(to: address).wait() }
        channels = [houseDatagrams, roomDatagrams]
        try client.syncClock(on: roomDatagrams)
        card = SimulatedSoundCard(playout: playout, schedule: EmissionSchedule(sampleRate: format.sampleRate, driftPPM: spec.crystalDriftPPM,
                                                                              start: SimulatedHouse.startTime + 1_000_000 * Int64(index + 1)),
                                  roomClock: clock, leadNanoseconds: Self.cardLeadNanoseconds, keepsAudio: keepsAudio, loop: loop)
        card.start()
        try connect()
    }

    /// A new TCP connection to the house over the room's link; the speaker says hello (with
    /// what it holds) when it becomes active.
    private func connect() throws {
        let houseStream = EmbeddedChannel(loop: loop), roomStream = EmbeddedChannel(loop: loop)
        try house.serve(connection: houseStream)
        try client.speak(on: roomStream)
        // Each connection draws its own delays and jitter.
        try SimulatedLink.join(roomStream, houseStream, model: spec.link, seed: seed &+ UInt64(connections) &* 0x9E37_79B9_7F4A_7C15,
                               isStream: true, loop: loop, queues: queues)
        connections += 1
        try houseStream.connect(to: address).wait()
        try roomStream.connect(to: address).wait()
        channels += [houseStream, roomStream]
    }

    /// Resets the room's TCP connection (both ends see it close; what was in flight is lost)
    /// and reconnects after the room's reconnect delay.
    func resetConnection() {
        for channel in channels.suffix(2) { channel.close(promise: nil) }
        loop.scheduleTask(in: .nanoseconds(spec.reconnectDelayNanoseconds)) { [self] in
            do { try connect() } catch { preconditionFailure("simulated room \(spec.name) cannot reconnect: \(error)") }
        }
    }

    /// Compares the room's clock mapping with the truth at true time `now`.
    func sampleClockTruth(now: Int64) {
        guard let mapping = client.clockMapping, mapping.spanNanoseconds >= Playout.minimumClockSpanNanoseconds else { return }
        let local = clock.reading(atBase: now)
        let error = Double(mapping.serverTime(atLocal: local) - now)
        let bound = mapping.bound(atLocal: local)
        trueErrors.append(abs(error))
        bounds.append(bound)
        if abs(error) <= bound { covered += 1 }
    }

    func result(format: AudioFormat) -> SimulatedHouse.RoomResult {
        let report = playout.report
        let capture = card.keepsAudio
            ? VirtualCapture(sampleRate: format.sampleRate, channelCount: format.channelCount, samples: card.samples,
                             periodFrames: card.periodFrames, periodTimes: card.periodTimes)
            : nil
        let sortedBounds = bounds.sorted()
        return SimulatedHouse.RoomResult(name: spec.name, digest: card.digest, framesEmitted: card.nextFrame, starvedBlocks: report.starvedBlocks,
                                         resyncs: report.resyncs, worstClockErrorNanoseconds: trueErrors.max() ?? .nan,
                                         reportedBoundCoverage: trueErrors.isEmpty ? .nan : Double(covered) / Double(trueErrors.count),
                                         medianReportedBoundNanoseconds: sortedBounds.isEmpty ? .nan : sortedBounds[sortedBounds.count / 2],
                                         reportedSyncErrorNanoseconds: report.syncErrorNanoseconds, problem: report.problem, capture: capture)
    }

    func close() {
        for channel in channels { _ = try? channel.finish(acceptAlreadyClosed: true) }
    }
}
