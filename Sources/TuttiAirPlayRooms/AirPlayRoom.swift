import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiProtocol
import TuttiSpeaker

/// An AirPlay 1 receiver (shairport-sync, an AV receiver, an AirPort Express) playing a room of
/// the house.
///
/// To the house it is a speaker like any other: a `SpeakerClient` connects to the house's wire
/// port under the room's name, syncs its clock, holds the stream's chunks and follows anchors,
/// flushes, volume and latency. Its "sound card" is the receiver: a `Playout` renders 352-frame
/// blocks at 44.1 kHz for a device whose frame n is heard at exactly `origin + n / 44 100 s` on
/// this process's clock, and each block goes to the receiver as one RAOP packet, with sync
/// packets that say when its frames are heard on that clock, which the receiver fits from its
/// timing requests (`RAOPSenderSession`). A block is sent `sendAheadNanoseconds` before it is
/// heard, and the room's hello tells the house so, so that every anchor and cut reaches the room
/// before the audio it changes has gone out: a receiver cannot take back what it was sent.
///
/// When the receiver cannot be reached or goes away, the room stays in the house, silent, with
/// its problem in its report, and connects again (1 s, doubling to 30 s).
///
/// Thread-safety: `start` and `stop` from any thread; everything else on its event loop.
public final class AirPlayRoom: Sendable {
    public struct Configuration: Sendable {
        public var houseHost: String
        public var housePort: Int
        /// The room's name in the house.
        public var name: String
        /// The receiver's RTSP address.
        public var receiverHost: String
        public var receiverPort: Int
        /// How long before a block is heard it is sent: more than the receiver's own output
        /// buffer and a resend's round trip; edits reach this room that much later than play.
        public var sendAheadNanoseconds: Int64 = 500_000_000
        /// The room's identity as a speaker of the house, and the house it talks to.
        public var identity = IdentityKey.random()
        public var houseKey: PeerKey?

        public init(houseHost: String, housePort: Int, name: String, receiverHost: String, receiverPort: Int) {
            self.houseHost = houseHost
            self.housePort = housePort
            self.name = name
            self.receiverHost = receiverHost
            self.receiverPort = receiverPort
        }
    }

    /// How long a receiver may go without asking for our time before its stream is taken
    /// for gone (shairport-sync asks every 3 s).
    static let receiverSilenceNanoseconds: Int64 = 15_000_000_000

    /// AirPlay 1's format: 44.1 kHz, 16-bit stereo, 352 frames a packet.
    static let format = AudioFormat(sampleRate: 44100, channelCount: 2, sampleFormat: .int16)
    static let framesPerPacket = 352

    public let configuration: Configuration
    private let eventLoop: any EventLoop
    private let state: NIOLoopBoundBox<State>
    private let client: SpeakerClient
    private let inputs: PlayoutInputs
    /// The playout's latest report, for the speaker client's status messages (another thread).
    private final class ReportBox: Sendable { let report = Mutex(PlayoutReport()) }
    private let latestReport = ReportBox()
    private let running = Mutex<Task<Void, Never>?>(nil)

    /// What the room's loop owns.
    final class State {
        let playout: Playout
        let clock: any HostClock
        let log: @Sendable (String) -> Void
        /// The local time device frame 0 is heard at.
        let origin: Int64
        var nextFrame: Int64 = 0
        var samples: [Int16]
        var session: RAOPSenderSession?
        /// The device frame the session's stream frame 0 is.
        var sessionFirstFrame: Int64 = 0
        var lastSync: Int64?
        var ticker: RepeatedTask?
        var retry: Scheduled<Void>?
        var backoffSeconds: Int64 = 1
        var problem = ""
        var lastLoggedFailure: String?
        var stopped = false

        init(playout: Playout, clock: any HostClock, log: @escaping @Sendable (String) -> Void) {
            self.playout = playout
            self.clock = clock
            self.log = log
            origin = clock.now()
            samples = [Int16](repeating: 0, count: AirPlayRoom.framesPerPacket * AirPlayRoom.format.channelCount)
        }
    }

    public init(configuration: Configuration, clock: any HostClock, eventLoop: any EventLoop, log: @escaping @Sendable (String) -> Void) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        let inputs = PlayoutInputs()
        self.inputs = inputs
        let playout = Playout(inputs: inputs, format: Self.format, blockFrames: Self.framesPerPacket, latencyNanoseconds: 0, localClock: clock)
        let name = configuration.name
        let roomLog: @Sendable (String) -> Void = { line in log("AirPlay room \(name): \(line)") }
        playout.onEvent = roomLog
        // Made here, off the loop, and handed to it: nothing else holds it.
        state = NIOLoopBoundBox.makeBoxSendingValue(State(playout: playout, clock: clock, log: roomLog), eventLoop: eventLoop)
        let latestReport = self.latestReport
        var speaker = SpeakerClient.Configuration(serverHost: configuration.houseHost, serverPort: configuration.housePort, name: configuration.name)
        speaker.outputLeadNanoseconds = configuration.sendAheadNanoseconds + Self.nanoseconds(ofFrame: Int64(Self.framesPerPacket))
        speaker.identity = configuration.identity
        speaker.membership = HouseMembership(house: configuration.houseKey)
        let address = try SocketAddress.makeAddressResolvingHost(configuration.houseHost, port: configuration.housePort)
        client = SpeakerClient(configuration: speaker, inputs: inputs, report: { latestReport.report.withLock { $0 } }, clock: clock, serverAddress: address, log: roomLog)
    }

    /// Local nanoseconds from device frame 0 to device frame `frame`, exactly (rounded down).
    static func nanoseconds(ofFrame frame: Int64) -> Int64 {
        let rate = Int64(format.sampleRate)
        return frame / rate * 1_000_000_000 + frame % rate * 1_000_000_000 / rate
    }

    /// The device frame heard `nanoseconds` after device frame 0 (rounded down): the inverse of
    /// `nanoseconds(ofFrame:)`, without overflow for years.
    static func frame(atNanoseconds nanoseconds: Int64) -> Int64 {
        let rate = Int64(format.sampleRate)
        return nanoseconds / 1_000_000_000 * rate + nanoseconds % 1_000_000_000 * rate / 1_000_000_000
    }

    public func start(group: any EventLoopGroup) {
        let client = self.client
        running.withLock { $0 = Task { await client.run(group: group) } }
        eventLoop.execute { [weak self] in
            guard let self, !self.state.value.stopped else { return }
            self.connect()
            self.state.value.ticker = self.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(5)) { [weak self] _ in self?.tick() }
        }
    }

    public func stop() {
        client.stop()
        inputs.stop()
        eventLoop.execute {
            let state = self.state.value
            state.stopped = true
            state.ticker?.cancel()
            state.retry?.cancel()
            state.session?.stop()
            state.session = nil
        }
    }

    /// The RAOP session to the receiver, again after a wait when it fails or ends. Only once the
    /// house has let the room in (its clock syncs then): a room still waiting to be admitted
    /// must not take a receiver a phone may be playing to.
    private func connect() {
        let state = self.state.value
        guard !state.stopped else { return }
        guard client.clockMapping != nil else {
            state.retry = eventLoop.scheduleTask(in: .seconds(1)) { [weak self] in self?.connect() }
            return
        }
        var sessionConfiguration = RAOPSenderSession.Configuration(host: configuration.receiverHost, port: configuration.receiverPort)
        sessionConfiguration.announcement = RAOPAnnouncement(encoding: .appleLossless, sampleRate: Self.format.sampleRate, channelCount: Self.format.channelCount,
                                                            bitsPerSample: 16, framesPerPacket: Self.framesPerPacket)
        let session = RAOPSenderSession(configuration: sessionConfiguration, eventLoop: eventLoop, clock: state.clock, log: state.log)
        state.session = session
        let receiver = "\(configuration.receiverHost):\(configuration.receiverPort)"
        let sessionID = ObjectIdentifier(session)
        session.onEnd = { [weak self] reason in self?.sessionEnded(sessionID, reason: reason) }
        session.start().whenComplete { [weak self] result in
            guard let room = self else { return }
            let state = room.state.value
            guard state.session.map(ObjectIdentifier.init) == sessionID else { return }
            switch result {
            case .success:
                // Its stream starts at the next block to send: its first sync goes out before it.
                state.sessionFirstFrame = state.nextFrame
                state.lastSync = nil
                state.backoffSeconds = 1
                state.problem = ""
                state.lastLoggedFailure = nil
                state.log("streaming to the AirPlay receiver at \(receiver)")
            case .failure(let error):
                room.sessionEnded(sessionID, reason: "\(error)")
            }
        }
    }

    private func sessionEnded(_ sessionID: ObjectIdentifier, reason: String) {
        let state = self.state.value
        guard state.session.map(ObjectIdentifier.init) == sessionID, !state.stopped else { return }
        state.session = nil
        let wait = state.backoffSeconds
        state.backoffSeconds = min(state.backoffSeconds * 2, 30)
        let receiver = "\(configuration.receiverHost):\(configuration.receiverPort)"
        state.problem = "the AirPlay receiver at \(receiver) is not playing: \(reason)"
        // One line per reason: a receiver switched off overnight is tried every 30 s, quietly.
        if state.lastLoggedFailure != reason {
            state.lastLoggedFailure = reason
            state.log("the receiver at \(receiver): \(reason); the room is silent, trying again in \(wait) s (and on, up to every 30 s, quietly while this holds)")
        }
        state.retry = eventLoop.scheduleTask(in: .seconds(wait)) { [weak self] in self?.connect() }
    }

    /// Renders and sends every block due within the send-ahead, and a sync packet a second.
    private func tick() {
        let state = self.state.value
        let now = state.clock.now()
        let block = Int64(Self.framesPerPacket)
        let ahead = configuration.sendAheadNanoseconds
        var streaming = state.session?.state == .streaming ? state.session : nil
        // A receiver that lost power or its network says nothing (no TCP reset): it stops asking
        // for our time, which it does every few seconds while it plays.
        if let session = streaming, session.silence(at: now) > Self.receiverSilenceNanoseconds {
            session.fail("no timing request from the receiver for \(Self.receiverSilenceNanoseconds / 1_000_000_000) s: it went away")
            streaming = nil
        }
        // A loop that fell behind (a stalled machine) skips what is already too late to send;
        // the receiver is told they are lost (their sequence numbers spent), so it plays them as
        // silence in their place.
        var skipped = 0
        while state.origin + Self.nanoseconds(ofFrame: state.nextFrame) < now + ahead / 2 {
            state.nextFrame += block
            skipped += 1
        }
        if skipped > 0 { streaming?.skipPackets(skipped) }
        if let session = streaming, state.lastSync.map({ now - $0 >= 1_000_000_000 }) ?? true || session.needsSync {
            // The frame heard about now, at its exact time, and the send-ahead as the latency
            // (constant: receivers take a change of it for a new latency).
            let heardNow = Self.frame(atNanoseconds: now - state.origin)
            if session.sendSync(frame: heardNow - state.sessionFirstFrame, heardAt: state.origin + Self.nanoseconds(ofFrame: heardNow),
                                latencyFrames: Self.frame(atNanoseconds: ahead)) {
                session.needsSync = false
                state.lastSync = now
            }
        }
        while state.origin + Self.nanoseconds(ofFrame: state.nextFrame) < now + ahead {
            let heard = state.origin + Self.nanoseconds(ofFrame: state.nextFrame)
            let device = LinearTimeMap(referenceFrame: state.nextFrame, referenceTime: heard, nanosecondsPerFrame: 1e9 / Double(Self.format.sampleRate))
            state.playout.render(firstFrame: state.nextFrame, device: device)
            var report = state.playout.report
            if !state.problem.isEmpty { report.problem = state.problem }
            latestReport.report.withLock { $0 = report }
            if let session = streaming {
                if report.isPlaying {
                    state.playout.block.withUnsafeBufferPointer { source in
                        state.samples.withUnsafeMutableBytes { bytes in
                            SampleConversion.convert(source.baseAddress!, count: source.count, to: .int16, into: bytes.baseAddress!)
                        }
                    }
                } else {
                    state.samples.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
                }
                state.samples.withUnsafeBufferPointer { session.sendAudio($0, frames: Self.framesPerPacket, frame: state.nextFrame - state.sessionFirstFrame) }
            }
            state.nextFrame += block
        }
    }
}
