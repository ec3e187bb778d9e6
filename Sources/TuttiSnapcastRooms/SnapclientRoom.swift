import NIOCore
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiProtocol
import TuttiSpeaker

/// A snapclient playing a room of the house.
///
/// To the house it is a speaker like any other: a `SpeakerClient` connects to the house's
/// wire port under the client's name, syncs its clock, holds the stream's chunks and follows
/// anchors, flushes, volume and latency. Its "sound card" is the snapclient: a `Playout`
/// renders 20 ms blocks for a device whose frame n is heard at exactly `origin + n / rate` on
/// this process's clock, and each block goes to the snapclient as a PCM wire chunk stamped so
/// that it plays the block then (time stamp = that time − the client's buffer). snapclient
/// corrects its own sound card's drift against that clock, which it syncs to this server by
/// its time messages. Sending starts only `sendAheadNanoseconds` before a block is heard, and
/// the room's hello tells the house so, so that every anchor and cut reaches the room before
/// the audio it changes has gone out: snapclient cannot take back what it was sent.
///
/// Thread-safety: everything but `start` and `stop` runs on the connection's event loop.
final class SnapclientRoom: @unchecked Sendable {
    struct Configuration: Sendable {
        var houseHost: String
        var housePort: Int
        var name: String
        var format = AudioFormat(sampleRate: 48000, channelCount: 2, sampleFormat: .int16)
        /// Frames per wire chunk: 20 ms, Snapcast's own chunk.
        var blockFrames = 960
        /// How long before a block is heard it is sent. snapclient needs it before its sound
        /// card's buffer takes it (tens of ms); more rides out network hiccups, but delays
        /// starts and edits by as much.
        var sendAheadNanoseconds: Int64 = 250_000_000
        /// The buffer snapclient is told it has: only the time stamps' offset here.
        var bufferMilliseconds = 1000
        /// The room's identity as a speaker of the house.
        var identity = IdentityKey.random()
        /// The house it may talk to: the one whose port it serves.
        var houseKey: PeerKey?
    }

    let configuration: Configuration
    let channel: any Channel
    let clock: any HostClock
    private let inputs = PlayoutInputs()
    private let playout: Playout
    private let client: SpeakerClient
    /// The playout's latest report, for the speaker client's status messages (another thread).
    private final class ReportBox: Sendable { let report = Mutex(PlayoutReport()) }
    private let latestReport = ReportBox()
    /// The local time device frame 0 is heard at.
    private let origin: Int64
    private var nextFrame: Int64 = 0
    private var pcm: [UInt8]
    private var ticker: RepeatedTask?
    /// How far the client's clock estimate is off at a time (`SnapclientClockMirror`); its
    /// chunks are stamped that much earlier. Set by the connection, on the event loop.
    var clientClockError: (Int64) -> Int64 = { _ in 0 }
    /// How fast the client's clock drifts from ours (`SnapclientClockMirror.drift`).
    var clientClockDrift: () -> Double = { 0 }
    private var running: Task<Void, Never>?

    init(configuration: Configuration, channel: any Channel, clock: any HostClock, log: @escaping @Sendable (String) -> Void) throws {
        self.configuration = configuration
        self.channel = channel
        self.clock = clock
        playout = Playout(inputs: inputs, format: configuration.format, blockFrames: configuration.blockFrames, latencyNanoseconds: 0, localClock: clock)
        var speaker = SpeakerClient.Configuration(serverHost: configuration.houseHost, serverPort: configuration.housePort, name: configuration.name)
        speaker.outputLeadNanoseconds = configuration.sendAheadNanoseconds + Self.nanoseconds(frames: configuration.blockFrames, rate: configuration.format.sampleRate)
        speaker.identity = configuration.identity
        speaker.membership = HouseMembership(house: configuration.houseKey)
        let report = latestReport
        let address = try SocketAddress.makeAddressResolvingHost(configuration.houseHost, port: configuration.housePort)
        let name = configuration.name
        client = SpeakerClient(configuration: speaker, inputs: inputs, report: { report.report.withLock { $0 } }, clock: clock, serverAddress: address) { line in
            log("snapclient room \(name): \(line)")
        }
        playout.onEvent = { line in log("snapclient room \(name): \(line)") }
        origin = clock.now()
        pcm = [UInt8](repeating: 0, count: configuration.blockFrames * configuration.format.channelCount * 2)
    }

    private static func nanoseconds(frames: Int, rate: Int) -> Int64 { Int64(frames) * 1_000_000_000 / Int64(rate) }

    /// The time (our clock) at which `nextFrame` is heard. Frames are spaced at the client's
    /// idea of our clock's rate, not ours: then its chunks are exactly 20 ms apart to the
    /// client, which has only its own sound card's drift left to correct (snapclient corrects
    /// by dropping and duplicating frames, in proportion to a median error, and a clock-rate
    /// difference left to it is heard as a standing error of ~2 µs per ppm and hunting).
    private var nextFrameTime: Double = 0

    /// Nanoseconds (our clock) of one frame as the client hears it.
    private var nanosecondsPerFrame: Double {
        1e9 / Double(configuration.format.sampleRate) / (1 - clientClockDrift())
    }

    func start(group: any EventLoopGroup) {
        let client = self.client
        running = Task { await client.run(group: group) }
        ticker = channel.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(5)) { [weak self] _ in self?.tick() }
    }

    func stop() {
        ticker?.cancel()
        client.stop()
        inputs.stop()
    }

    /// Renders and sends every block due within the send-ahead.
    private func tick() {
        let now = clock.now()
        let block = configuration.blockFrames
        if nextFrameTime == 0 { nextFrameTime = Double(origin) }
        // A loop that fell behind (a stalled machine) skips what is already too late to send.
        let earliest = Double(now + configuration.sendAheadNanoseconds / 2)
        while nextFrameTime < earliest {
            nextFrameTime += Double(block) * nanosecondsPerFrame
            nextFrame += Int64(block)
        }
        var sent = false
        while nextFrameTime < Double(now + configuration.sendAheadNanoseconds) {
            let spacing = nanosecondsPerFrame
            let heard = Int64(nextFrameTime.rounded())
            let device = LinearTimeMap(referenceFrame: nextFrame, referenceTime: heard, nanosecondsPerFrame: spacing)
            playout.render(firstFrame: nextFrame, device: device)
            let report = playout.report
            latestReport.report.withLock { $0 = report }
            // Silence too is sent: snapclient (0.26) writes nothing to its card when it has no
            // chunk, so the card runs dry, and its recovery from that underrun moved its
            // timing by a few frames (a hard resync 1.1 s into every start, measured).
            if report.isPlaying {
                playout.block.withUnsafeBufferPointer { samples in
                    pcm.withUnsafeMutableBytes { bytes in
                        SampleConversion.convert(samples.baseAddress!, count: samples.count, to: .int16, into: bytes.baseAddress!)
                    }
                }
            } else {
                pcm.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
            }
            let stamp = heard - Int64(configuration.bufferMilliseconds) * 1_000_000 - clientClockError(heard)
            channel.write(SnapcastMessage(payload: .wireChunk(timestamp: .init(nanoseconds: stamp), data: pcm)), promise: nil)
            sent = true
            nextFrame += Int64(block)
            nextFrameTime += Double(block) * spacing
        }
        if sent { channel.flush() }
    }
}
