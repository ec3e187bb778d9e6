import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiMedia
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
        public var statusIntervalNanoseconds: Int64 = 500_000_000
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
    private let clock: any HostClock
    private let clockSync: ClockSyncClient
    private let stopped = Atomic<Bool>(false)
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
        clockSync = ClockSyncClient(server: serverAddress, clock: clock) { inputs.setClock($0) }
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
        try channel.pipeline.syncOperations.addHandlers([
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

    /// Connects and stays connected until `stop()`.
    public func run(group: any EventLoopGroup) async {
        do { try await clockSync.start(group: group) } catch { log("clock sync: \(error)") }
        var backoff: Int64 = 100_000_000
        while !stopped.load(ordering: .acquiring) {
            do {
                let channel = try await ClientBootstrap(group: group)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture { try self.speak(on: channel) }
                    }
                    .connect(host: configuration.serverHost, port: configuration.serverPort).get()
                current.withLock { $0 = channel }
                backoff = 100_000_000
                try await channel.closeFuture.get()
            } catch {
                if !stopped.load(ordering: .acquiring) { log("\(configuration.serverHost):\(configuration.serverPort): \(error)") }
            }
            current.withLock { $0 = nil }
            if stopped.load(ordering: .acquiring) { break }
            try? await Task.sleep(nanoseconds: UInt64(backoff))  // reconnect backoff
            backoff = min(backoff * 2, 5_000_000_000)
        }
        await clockSync.stop()
    }

    public func stop() {
        stopped.store(true, ordering: .releasing)
        let channel = current.withLock { $0 }
        channel?.close(promise: nil)
    }

    fileprivate var hello: WireMessage {
        .hello(.init(role: .speaker, name: configuration.name, codecs: StreamCodec.allCases.map(\.wireName),
                     latencyNanoseconds: configuration.latencyNanoseconds))
    }

    fileprivate func handle(_ message: WireMessage) {
        switch message {
        case .welcome, .controlRequest, .controlResponse, .hello, .speakerStatus:
            break
        case .streamStart(let m):
            guard let codec = StreamCodec(wireName: m.codec) else {
                log("server sent stream \(m.streamID) in unsupported codec \(m.codec)")
                return
            }
            inputs.startStream(.init(id: m.streamID, codec: codec, sampleRate: Int(m.sampleRate), channelCount: Int(m.channelCount), codecHeader: m.codecHeader))
        case .audioChunk(let m):
            inputs.receive(.init(firstFrame: m.firstFrame, frameCount: Int(m.frameCount), payload: m.payload), streamID: m.streamID, at: clock.now())
        case .anchor(let m):
            let serverNow = clockSync.mapping?.serverTime(atLocal: clock.now()) ?? m.serverTime
            inputs.apply(TimelineAnchor(timelineFrame: m.timelineFrame, serverTime: m.serverTime, isPlaying: m.isPlaying), streamID: m.streamID, now: serverNow)
        case .flush(let m):
            inputs.flush(streamID: m.streamID, from: m.fromFrame)
        case .streamEnd(let m):
            inputs.end(streamID: m.streamID, at: m.endFrame, time: clock.now())
        case .volume(let m):
            inputs.setVolume(m.level, rampNanoseconds: m.rampNanoseconds)
        case .goodbye(let reason):
            log("server said goodbye: \(reason)")
        }
    }

    /// The clock-sync uncertainty, or −1 while the estimate is too young to play by (the
    /// playout engine waits for two seconds of exchanges).
    private var clockErrorForStatus: Int64 {
        guard let mapping = clockSync.mapping, mapping.spanNanoseconds >= Playout.minimumClockSpanNanoseconds else { return -1 }
        return Int64(mapping.errorNanoseconds.rounded(.up))
    }

    fileprivate func status() -> WireMessage {
        let report = self.report()
        let snapshot = inputs.snapshot
        let playhead = report.playheadFrame
        let buffered = playhead >= 0 ? inputs.chunks.contiguousEnd(from: playhead) : -1
        let state: WireMessage.SpeakerStatus.State = report.isPlaying ? .playing
            : snapshot.stream == nil ? .idle
            : (snapshot.schedule?.anchors.last?.isPlaying == false ? .paused : .buffering)
        return .speakerStatus(.init(state: state, streamID: report.streamID, playheadFrame: playhead, bufferedUntilFrame: buffered,
                                    syncErrorNanoseconds: report.syncErrorNanoseconds,
                                    clockErrorNanoseconds: clockErrorForStatus,
                                    underruns: UInt32(clamping: report.deviceUnderruns + report.starvedBlocks),
                                    fillRate: Float(snapshot.fillRate), problem: report.problem))
    }
}

/// The speaker end of one TCP connection.
final class SpeakerConnectionHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage
    let client: SpeakerClient

    init(client: SpeakerClient) { self.client = client }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(client.hello), promise: nil)
        scheduleStatus(context.channel)
        context.fireChannelActive()
    }

    private func scheduleStatus(_ channel: any Channel) {
        let client = self.client
        channel.eventLoop.scheduleTask(in: .nanoseconds(client.configuration.statusIntervalNanoseconds)) { [weak self] in
            guard channel.isActive else { return }
            channel.writeAndFlush(client.status(), promise: nil)
            self?.scheduleStatus(channel)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.handle(Self.unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A malformed message from the server: report it and drop only this connection.
        context.close(promise: nil)
    }
}
