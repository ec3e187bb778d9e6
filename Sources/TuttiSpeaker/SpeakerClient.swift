import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiStreamAudio
import TuttiProtocol

/// A room's connection to the house: says hello, feeds what arrives (streams, chunks, anchors,
/// flushes, volume) into the playout engine's inputs, and reports status twice a second.
/// Reconnects with backoff when the server goes away; the buffered audio keeps playing
/// meanwhile. Thread-safety: all members may be called from any thread.
public final class SpeakerClient: Sendable {
    public struct Configuration: Sendable {
        public var serverHost: String
        public var serverPort: Int
        public var name: String
        public var latencyNanoseconds: Int64 = 0
        /// How long before a frame leaves the DAC the playout commits it to the device
        /// (`PlayoutEngine.outputLeadNanoseconds`), told to the house so that its anchors arrive
        /// in time to be heard from their first frame.
        public var outputLeadNanoseconds: Int64 = 0
        public var statusIntervalNanoseconds: Int64 = 500_000_000
        public var clockSync = ClockSyncClient.Configuration()
        /// Above this clock error bound the room says its clock is uncertain instead of claiming
        /// sync (and below four fifths of it, that it is sure again). The bound is a bound: at
        /// least half the path's round-trip floor (`ClockEstimator`), a tenth of a millisecond
        /// on a wired LAN and about one on Wi-Fi, whatever the true error. Two rooms within
        /// earshot fuse into one sound up to a few milliseconds apart (the precedence effect),
        /// and begin to smear transients past that: below 2 ms a warning would only say that
        /// the path is a network.
        public var uncertainClockNanoseconds: Int64 = 2_000_000
        /// The speaker's identity (`tutti speaker` keeps it in its state directory).
        public var identity = IdentityKey.random()
        /// The house it belongs to, once admitted; it talks to no other.
        public var membership = HouseMembership()
        public init(serverHost: String, serverPort: Int, name: String) {
            self.serverHost = serverHost
            self.serverPort = serverPort
            self.name = name
        }
    }

    public let configuration: Configuration
    /// Where what arrives goes: the playout's inputs.
    public let inputs: PlayoutInputs
    /// The playout's latest report, for status messages.
    private let report: @Sendable () -> PlayoutReport
    fileprivate let clock: any HostClock
    private let clockSync: ClockSyncClient
    private let stopped = Atomic<Bool>(false)
    private let clockUncertain = Atomic<Bool>(false)
    private let current = Mutex<(any Channel)?>(nil)
    /// One line per problem, for the process to print.
    private let log: @Sendable (String) -> Void

    /// A room's connection for the playout whose inputs and reports are given (a real room's
    /// `PlayoutEngine`, or a simulated room's `Playout`).
    public init(configuration: Configuration, inputs: PlayoutInputs, report: @escaping @Sendable () -> PlayoutReport, clock: any HostClock,
                serverAddress: SocketAddress, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.inputs = inputs
        self.report = report
        self.clock = clock
        self.log = log
        let pathChangesLogged = NIOLockedValueBox(0)
        clockSync = ClockSyncClient(server: serverAddress, clock: clock, configuration: configuration.clockSync) { mapping in
            inputs.setClock(mapping)
            // A route change is worth a line: the round trip moved, and what the estimate made of it.
            if pathChangesLogged.withLockedValue({ logged in defer { logged = mapping.pathChanges }; return mapping.pathChanges > logged }) {
                log("the path to the house changed (its round-trip floor stepped): the clock carries on, taking \((mapping.asymmetryNanoseconds / 1e4).rounded() / 100) ms of the lines' offset as the two ways' asymmetry")
            }
        }
    }

    /// A room's connection for a real room's playout engine.
    public convenience init(configuration: Configuration, engine: PlayoutEngine, clock: any HostClock, serverAddress: SocketAddress,
                            log: @escaping @Sendable (String) -> Void) {
        self.init(configuration: configuration, inputs: engine.inputs, report: { engine.latestReport }, clock: clock,
                  serverAddress: serverAddress, log: log)
    }

    /// Speaks the room's side of the protocol on `channel`, a connection to the house made by
    /// someone else (a simulated link): adds the codec and the connection's handler. Call on
    /// the channel's event loop, before it is active.
    public func speak(on channel: any Channel) throws {
        let membership = configuration.membership
        let address = "\(configuration.serverHost):\(configuration.serverPort)"
        try channel.pipeline.syncOperations.addHandlers([
            SecureChannelHandler(side: .client(role: .speaker, identity: configuration.identity,
                                               acceptHouse: { membership.refusal(for: $0, at: address) })),
            ByteToMessageHandler(WireMessageDecoder()),
            MessageToByteHandler(WireMessageEncoder()),
            SpeakerConnectionHandler(client: self),
        ])
        current.withLock { $0 = channel }
    }

    /// Runs the room's clock sync on `channel`, a datagram channel made by someone else. Call on
    /// the channel's event loop.
    public func syncClock(on channel: any Channel) throws {
        try clockSync.attach(to: channel)
    }

    public var clockMapping: ClockMapping? { clockSync.mapping }

    /// Connects and stays connected until `stop()`, reconnecting after a lost connection or a
    /// refused one with a jittered backoff (0.1 s doubling to 2 s), so rooms that lost the
    /// house together do not knock on its door in lockstep. Says in one line what happened and
    /// when it tries next.
    public func run(group: any EventLoopGroup) async {
        do { try await clockSync.start(group: group) } catch { log("clock sync: \(Self.describe(error)); playing without it") }
        let house = "house \(configuration.serverHost):\(configuration.serverPort)"
        var backoff = ReconnectBackoff()
        var lastFailure = ""
        var lastRefusal = ""
        var failedAttempts = 0
        while !stopped.load(ordering: .acquiring) {
            do {
                let channel = try await ClientBootstrap(group: group)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .connectTimeout(.seconds(5))
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture { try self.speak(on: channel) }
                    }
                    .connect(host: configuration.serverHost, port: configuration.serverPort).get()
                // Under the lock `stop()` takes: a stop while this connection was being made
                // found no channel to close, and the house keeps a speaker waiting for its
                // admission for good (a Ctrl-C then hung the speaker until its SIGKILL).
                if current.withLock({ current in current = channel; return stopped.load(ordering: .acquiring) }) {
                    channel.close(promise: nil)
                }
                if failedAttempts > 0 { log("connected to \(house) after \(failedAttempts) failed attempt\(failedAttempts == 1 ? "" : "s")") }
                backoff.reset()
                lastFailure = ""
                failedAttempts = 0
                try await channel.closeFuture.get()
                current.withLock { $0 = nil }
                clockSync.setSession(nil)
                if stopped.load(ordering: .acquiring) { break }
                let reason = closeReason.withLock { reason in defer { reason = nil }; return reason } ?? "closed by the house"
                if refusedHouse.withLock({ refused in defer { refused = false }; return refused }) {
                    // Another house than its own: said once, then tried again quietly (its own may
                    // come back at this address).
                    if reason != lastRefusal { log(reason) }
                    lastRefusal = reason
                    backoff.setToMaximum()
                } else {
                    lastRefusal = ""
                    log("connection to \(house) lost (\(reason)); reconnecting in \(Self.seconds(backoff.current)) s, playing from the buffer meanwhile")
                }
            } catch {
                current.withLock { $0 = nil }
                if stopped.load(ordering: .acquiring) { break }
                let reason = Self.describe(error)
                // Once per reason, then every 30 attempts: a house down for an hour is one line a minute.
                failedAttempts += 1
                if reason != lastFailure || failedAttempts % 30 == 0 {
                    log("\(house) unreachable (\(reason)); retrying in \(Self.seconds(backoff.current)) s")
                }
                lastFailure = reason
            }
            try? await Task.sleep(nanoseconds: UInt64(backoff.next()))
        }
        await clockSync.stop()
    }

    /// Why the connection closed, set by its handler when an error closed it.
    fileprivate let closeReason = Mutex<String?>(nil)
    /// Set when the connection closed because the house is not this speaker's.
    fileprivate let refusedHouse = Mutex(false)

    private static func seconds(_ nanoseconds: Int64) -> String {
        let tenths = (max(0, nanoseconds) + 50_000_000) / 100_000_000
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// An error of connecting or of a connection, in a few words: "connection refused",
    /// "cannot resolve nas.local", "no answer within 5 s".
    static func describe(_ error: any Error) -> String {
        if let failure = error as? NIOConnectionError {
            if let dns = failure.dnsAError ?? failure.dnsAAAAError { return "cannot resolve \(failure.host): \(dns)" }
            if let first = failure.connectionErrors.first { return describe(first.error) }
            return "no address for \(failure.host)"
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if let channel = error as? ChannelError {
            switch channel {
            case .connectTimeout(let amount): return "no answer within \(amount.nanoseconds / 1_000_000_000) s"
            case .ioOnClosedChannel, .alreadyClosed, .eof: return "connection closed"
            default: return "\(channel)"
            }
        }
        if let wire = error as? WireError { return "malformed message from the house: \(wire)" }
        if let secure = error as? SecureChannelError { return secure.isRefusedHouse ? secure.reason : "secure channel: \(secure.reason)" }
        return "\(error)"
    }

    public func stop() {
        let channel = current.withLock { current in
            stopped.store(true, ordering: .releasing)
            return current
        }
        channel?.close(promise: nil)
    }

    fileprivate var hello: WireMessage {
        .hello(.init(role: .speaker, name: configuration.name, codecs: StreamCodec.allCases.map(\.wireName),
                     latencyNanoseconds: configuration.latencyNanoseconds, outputLeadNanoseconds: configuration.outputLeadNanoseconds,
                     resume: inputs.resume))
    }

    fileprivate func handle(_ message: WireMessage) {
        switch message {
        case .welcome, .controlRequest, .controlResponse, .hello, .speakerStatus, .authenticate, .admission:
            break
        case .streamStart(let m):
            guard let codec = StreamCodec(wireName: m.codec) else {
                log("server sent stream \(m.streamID) in unsupported codec \(m.codec)")
                return
            }
            inputs.startStream(.init(id: m.streamID, codec: codec, sampleRate: Int(m.sampleRate), channelCount: Int(m.channelCount), codecHeader: m.codecHeader),
                               epoch: m.epoch)
        case .audioChunk(let m):
            inputs.receive(.init(firstFrame: m.firstFrame, frameCount: Int(m.frameCount), payload: m.payload), streamID: m.streamID, at: clock.now())
        case .anchor(let m):
            let serverNow = clockSync.mapping?.serverTime(atLocal: clock.now()) ?? m.serverTime
            inputs.apply(TimelineAnchor(timelineFrame: m.timelineFrame, serverTime: m.serverTime, isPlaying: m.isPlaying), streamID: m.streamID, now: serverNow)
            let spare = m.serverTime - serverNow - configuration.outputLeadNanoseconds - (inputs.latencyNanoseconds ?? configuration.latencyNanoseconds)
            // Late only for audio this room holds: a room joining a playing stream (or back
            // from a reconnect) is sent the anchors in force, long past, and the audio from its
            // join point on, which it plays in time.
            if spare < 0 && clockSync.mapping != nil && inputs.chunks.chunk(containing: m.timelineFrame) != nil {
                log("the anchor of timeline frame \(m.timelineFrame) arrived \(-spare / 1_000_000) ms too late for this room's output lead: its first \(-spare / 1_000_000) ms are not heard here")
            }
        case .flush(let m):
            inputs.flush(streamID: m.streamID, from: m.fromFrame, epoch: m.epoch)
        case .streamEnd(let m):
            inputs.end(streamID: m.streamID, at: m.endFrame, time: clock.now())
        case .volume(let m):
            inputs.setVolume(m.level, rampNanoseconds: m.rampNanoseconds)
        case .goodbye(let reason):
            log("server said goodbye: \(reason)")
        case .roomSettings(let m):
            let latency = inputs.latencyNanoseconds ?? configuration.latencyNanoseconds
            if m.latencyNanoseconds != latency {
                log("the house set this room's latency to \(Double(m.latencyNanoseconds) / 1e6) ms (was \(Double(latency) / 1e6) ms)")
            }
            inputs.setLatency(m.latencyNanoseconds)
            if m.channelMode != inputs.channelMode {
                log("the house set this room to play \(Self.describe(m.channelMode)) (was \(Self.describe(inputs.channelMode)))")
                inputs.setChannelMode(m.channelMode)
            }
            if m.name != configuration.name { log("the house calls this room '\(m.name)'") }
        }
    }

    private static func describe(_ mode: ChannelMode) -> String {
        switch mode {
        case .stereo: "both channels"
        case .left: "the left channel only"
        case .right: "the right channel only"
        case .mono: "both channels mixed to mono"
        }
    }

    /// What the house said of this speaker's admission, on the connection whose handshake gave
    /// `session`.
    fileprivate func admission(_ admission: WireMessage.Admission, session: SecureHandshake.Session, houseName: String) {
        guard admission.isAdmitted else {
            // The code is this speaker's own reckoning from the connection, not the house's
            // word: a house that showed another would be showing another speaker, or a
            // connection relayed by a house in the middle.
            let code = session.admissionCode
            log("waiting to be admitted to the house '\(houseName)' (code \(code)): on the house, run tutti ctl admit \(configuration.name.contains(" ") ? "'\(configuration.name)'" : configuration.name) or press Admit in its web UI, and check it shows this code")
            return
        }
        do {
            if try configuration.membership.admitted(by: session.houseKey, name: houseName) {
                log("admitted to the house '\(houseName)' (key \(session.houseKey.fingerprint)): this speaker plays from no other house from now on")
            }
        } catch {
            log("admitted to the house '\(houseName)', but \(error): it will have to be admitted again after a restart")
        }
        clockSync.setSession(session.clock)
    }

    /// The clock-sync uncertainty, or −1 while the estimate is too young to play by (the
    /// playout waits for `Playout.minimumClockSpanNanoseconds` of exchanges).
    private var clockErrorForStatus: Int64 {
        guard let mapping = clockSync.mapping, mapping.spanNanoseconds >= Playout.minimumClockSpanNanoseconds else { return -1 }
        return mapping.reportedBound(atLocal: clock.now())
    }

    /// "clock uncertain" while the bound is above `uncertainClockNanoseconds` (with hysteresis,
    /// so a bound near it does not flip the report at every status), else empty.
    private var clockProblem: String {
        let bound = clockErrorForStatus
        // In its first ten seconds an estimate is still settling (its rate is uncertain, and the
        // bound allows for it): not yet a verdict on the network.
        guard bound >= 0, let span = clockSync.mapping?.spanNanoseconds, span >= 10_000_000_000 else { return "" }
        let limit = configuration.uncertainClockNanoseconds
        let uncertain = clockUncertain.load(ordering: .relaxed) ? bound > limit * 4 / 5 : bound > limit
        clockUncertain.store(uncertain, ordering: .relaxed)
        // The same words while it lasts (the house logs each change); the bound itself is in the status.
        return uncertain ? "clock uncertain: its error bound is over \(Double(limit) / 1e6) ms; playing on, perhaps audibly out of sync" : ""
    }

    fileprivate var isClockReady: Bool {
        guard let mapping = clockSync.mapping else { return false }
        return mapping.spanNanoseconds >= Playout.minimumClockSpanNanoseconds
    }

    fileprivate func status() -> WireMessage {
        let report = self.report()
        let snapshot = inputs.snapshot
        let playhead = report.playheadFrame
        // Before the room plays: what it holds from where the stream is held (a stream waiting
        // for its start, or paused).
        let from = playhead >= 0 ? playhead : snapshot.schedule?.anchors.last.flatMap { $0.isPlaying ? nil : $0.timelineFrame } ?? -1
        let buffered = from >= 0 ? inputs.chunks.contiguousEnd(from: from) : -1
        let state: WireMessage.SpeakerStatus.State = report.isPlaying ? .playing
            : snapshot.stream == nil ? .idle
            : (snapshot.schedule?.anchors.last?.isPlaying == false ? .paused : .buffering)
        return .speakerStatus(.init(state: state, streamID: report.streamID, playheadFrame: playhead, bufferedUntilFrame: buffered,
                                    syncErrorNanoseconds: report.syncErrorNanoseconds,
                                    clockErrorNanoseconds: clockErrorForStatus,
                                    underruns: UInt32(clamping: report.deviceUnderruns + report.starvedBlocks),
                                    fillRate: Float(snapshot.fillRate), problem: report.problem.isEmpty ? clockProblem : report.problem))
    }
}

/// The speaker end of one TCP connection.
final class SpeakerConnectionHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage
    let client: SpeakerClient
    /// The secure channel's session: the house's key and the clock-sync key.
    private let session = Mutex<SecureHandshake.Session?>(nil)
    private let houseName = Mutex("")

    init(client: SpeakerClient) { self.client = client }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let session = event as? SecureHandshake.Session { self.session.withLock { $0 = session } }
        context.fireUserInboundEventTriggered(event)
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(client.hello), promise: nil)
        scheduleStatus(context.channel)
        context.fireChannelActive()
    }

    /// Status goes out every `statusIntervalNanoseconds`, and at once when the clock estimate
    /// becomes good enough to play by: a house holding a `play` for this room starts sooner.
    /// Only that moment is polled for; once the clock is ready (it stays so for the
    /// connection) the loop wakes only to send (20 wake-ups a second fewer on a small speaker).
    private func scheduleStatus(_ channel: any Channel, lastSent: Int64 = 0, clockWasReady: Bool = false) {
        let client = self.client
        let delay = clockWasReady ? max(Self.statusPollNanoseconds, lastSent + client.configuration.statusIntervalNanoseconds - client.clock.now())
                                  : Self.statusPollNanoseconds
        channel.eventLoop.scheduleTask(in: .nanoseconds(delay)) { [weak self] in
            guard channel.isActive else { return }
            let now = client.clock.now()
            let clockReady = client.isClockReady
            var sent = lastSent
            if clockReady != clockWasReady || now - lastSent >= client.configuration.statusIntervalNanoseconds {
                channel.writeAndFlush(client.status(), promise: nil)
                sent = now
            }
            self?.scheduleStatus(channel, lastSent: sent, clockWasReady: clockReady)
        }
    }

    static let statusPollNanoseconds: Int64 = 50_000_000

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = Self.unwrapInboundIn(data)
        switch message {
        case .welcome(let welcome):
            houseName.withLock { $0 = welcome.serverName }
        case .admission(let admission):
            guard let session = session.withLock({ $0 }) else { preconditionFailure("a message before the secure channel opened") }
            client.admission(admission, session: session, houseName: houseName.withLock { $0 })
        default:
            client.handle(message)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A malformed message or a broken connection: say why, and drop only this connection.
        let reason = SpeakerClient.describe(error)
        client.closeReason.withLock { $0 = $0 ?? reason }
        if let secure = error as? SecureChannelError, secure.isRefusedHouse { client.refusedHouse.withLock { $0 = true } }
        context.close(promise: nil)
    }
}
