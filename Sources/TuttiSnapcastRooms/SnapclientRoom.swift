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
    private var running: Task<Void, Never>?

    init(configuration: Configuration, channel: any Channel, clock: any HostClock, log: @escaping @Sendable (String) -> Void) throws {
        self.configuration = configuration
        self.channel = channel
        self.clock = clock
        playout = Playout(inputs: inputs, format: configuration.format, blockFrames: configuration.blockFrames, latencyNanoseconds: 0, localClock: clock)
        var speaker = SpeakerClient.Configuration(serverHost: configuration.houseHost, serverPort: configuration.housePort, name: configuration.name)
        speaker.outputLeadNanoseconds = configuration.sendAheadNanoseconds + Self.nanoseconds(frames: configuration.blockFrames, rate: configuration.format.sampleRate)
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

    /// Local time at which device frame `frame` is heard.
    private func time(ofFrame frame: Int64) -> Int64 {
        origin + WideMath.multiplyDivide(frame, 1_000_000_000, Int64(configuration.format.sampleRate))
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
        let rate = configuration.format.sampleRate
        let block = Int64(configuration.blockFrames)
        // A loop that fell behind (a stalled machine) skips what is already too late to send.
        let earliest = now + configuration.sendAheadNanoseconds / 2
        if time(ofFrame: nextFrame) < earliest {
            let frames = WideMath.multiplyDivide(earliest - origin, Int64(rate), 1_000_000_000)
            nextFrame = (frames / block + 1) * block
        }
        var sent = false
        while time(ofFrame: nextFrame) < now + configuration.sendAheadNanoseconds {
            let device = LinearTimeMap(referenceFrame: 0, referenceTime: origin, nanosecondsPerFrame: 1e9 / Double(rate))
            playout.render(firstFrame: nextFrame, device: device)
            let report = playout.report
            latestReport.report.withLock { $0 = report }
            if report.isPlaying {
                // Snapcast's client plays silence of its own between chunks: nothing is sent
                // while the room is silent.
                playout.block.withUnsafeBufferPointer { samples in
                    pcm.withUnsafeMutableBytes { bytes in
                        SampleConversion.convert(samples.baseAddress!, count: samples.count, to: .int16, into: bytes.baseAddress!)
                    }
                }
                let stamp = time(ofFrame: nextFrame) - Int64(configuration.bufferMilliseconds) * 1_000_000
                channel.write(SnapcastMessage(payload: .wireChunk(timestamp: .init(nanoseconds: stamp), data: pcm)), promise: nil)
                sent = true
            }
            nextFrame += block
        }
        if sent { channel.flush() }
    }
}
