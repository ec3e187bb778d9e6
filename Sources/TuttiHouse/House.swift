import Foundation
import NIOCore
import TuttiCore
import TuttiMedia
import TuttiProtocol

/// The house: its rooms, its groups, and the streams its groups play. What front ends, the
/// server and tests hold.
///
/// All its state is `HouseCore`'s, confined to `loop` and reached through a loop-bound box
/// (`NIOLoopBoundBox`), so any access from elsewhere traps. From any thread, `perform(_:)` runs
/// a command on the loop and answers; `observeChanges` says when something may have changed.
///
/// Thread-safety: `Sendable`. Methods marked "on the loop" must be called on `loop`.
public final class House: Sendable {
    public struct Configuration: Sendable {
        public var name = "tutti"
        public var stateDirectory: String?
        public var sampleRate = 48000
        public var channelCount = 2
        public var codec: StreamCodec = .flac
        public var chunkFrames = 2048
        /// How far ahead of the playhead audio is produced and sent: enhanced buffering.
        public var bufferDepthNanoseconds: Int64 = 300_000_000_000
        /// How long an anchor (a start, resume or pause) needs to reach every room and be
        /// applied there: the house's store commit, the network, the speaker's loop. Anchors are
        /// scheduled this far ahead *beyond* the group's largest commitment
        /// (`GroupSession.largestCommitment`: a room's output lead plus its latency, about 95 ms
        /// for a speaker on a virtual or ALSA card), so `play` with ready rooms is heard about
        /// 145 ms after the command. (At 90 ms in all, less than a room's commitment, rooms on a
        /// loaded machine began 5–45 ms into the track.)
        public var startDelayNanoseconds: Int64 = 50_000_000
        /// Queue edits, seeks and skips cut the stream this far ahead of what is heard, beyond
        /// the group's largest commitment: the house's time to decode, encode and deliver the
        /// audio after the cut, which a busy machine needs (at 150 ms in all a loaded house was
        /// seen to deliver it late, and the room fell silent for 10 ms).
        public var editLeadNanoseconds: Int64 = 160_000_000
        /// A queue edit that cuts the stream at least this far ahead of the playhead is seamless
        /// in every room; closer (down to the start delay) the rooms may have decoded past the
        /// cut, and the reply says so.
        public var flushMarginNanoseconds: Int64 = 500_000_000
        /// A joining room starts this far after the playhead (the data must reach it first).
        public var joinMarginNanoseconds: Int64 = 200_000_000
        /// `play` waits at most this long for its rooms to be ready (`PendingStart`); a room not
        /// ready by then joins in sync later.
        public var startWaitNanoseconds: Int64 = 1_500_000_000
        /// A room is ready to start once it has been sent this much of the stream (and its clock
        /// is settled).
        public var readyAudioNanoseconds: Int64 = 250_000_000
        /// How long opening the store waits for another process's SQLite lock before the house
        /// runs without a store (and leaves the file alone).
        public var storeBusyTimeoutSeconds: Double = 5
        /// A ready room whose clock bound is within this plays a start in sync from its first
        /// sample; over it, it starts at once and slews into sync (`RoomStart`). Issue 33's
        /// target over a whole track from a cold start.
        public var startBoundTargetNanoseconds: Int64 = 100_000
        /// Produce on the house's event loop, a step at a time, instead of on a thread of its own:
        /// for a simulated house, whose production must be a function of the queue and the
        /// playhead, not of thread timing. Steps run every `productionStepNanoseconds` and at
        /// once after an edit.
        public var stepsProductionOnLoop = false
        public var productionStepNanoseconds: Int64 = 100_000_000
        /// Opens queue items that are URLs; nil refuses them, each with a one-line error.
        public var network: (any NetworkInputOpener)?
        /// The directories a controller may play files from (`MediaAccess`), besides the
        /// library's; nil for any readable file (a house in a test, or a simulated one).
        public var allowedDirectories: [String]?
        /// The music library's roots (`tutti server --music`); none, no library.
        public var musicDirectories: [String] = []
        /// The secret a controller proves it holds (`ControllerToken`): `tutti server` reads it
        /// from the state directory; a house in a test gets a random one and gives it to its
        /// clients.
        public var controllerToken = ControllerToken.random()
        /// Where the token is kept, for the refusal that tells a controller where to find it;
        /// nil when it is in no file.
        public var controllerTokenPath: String?
        /// The wire port's connections (`ConnectionBudget`): one that has not said a speaker's
        /// hello or proved a controller's token is closed after 10 s, and at most 64 wait so;
        /// speakers and controllers up to `maximumTrusted` (`tutti server --max-connections`).
        public var wireConnectionLimits = ConnectionBudget.Limits()
        /// The house's identity (`IdentityKey`), which it proves in every connection's
        /// handshake and admitted speakers remember: `tutti server` keeps it in the state
        /// directory; a house in a test gets a random one.
        public var identity = IdentityKey.random()
        /// Where the admitted speakers are kept (`SpeakerAdmission`); nil keeps them in memory.
        public var admittedSpeakersPath: String?
        /// Speakers admitted ahead, by key, beside those of the file: a simulated house's own
        /// rooms, a test's.
        public var admittedSpeakers: [PeerKey] = []
        public init() {}
    }

    /// The answer to a command: called once, on the house's loop.
    public typealias Respond = (Result<ControlReply, ControlRefusal>) -> Void

    public let configuration: Configuration
    public let loop: any EventLoop
    let clock: any HostClock
    let log: @Sendable (String) -> Void
    /// The music library, with `musicDirectories` (`HouseCore+Library.swift`).
    let library: MusicLibrary?
    /// Everything that changes, on the loop.
    let core: NIOLoopBoundBox<HouseCore>
    /// The clock-sync sessions of the admitted speakers' connections, which the clock-sync
    /// responder answers (`ClockSyncResponder`).
    public let clockSessions = ClockSyncSessions()

    /// How long after a restart rooms may take to reconnect: a speaker's reconnection backoff
    /// reaches 2 s, ±20 % (`ReconnectBackoff`).
    static let reconnectAllowanceNanoseconds: Int64 = 2_500_000_000

    public init(configuration: Configuration, loop: any EventLoop, clock: any HostClock, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.loop = loop
        self.clock = clock
        self.log = log
        var library: MusicLibrary?
        if !configuration.musicDirectories.isEmpty {
            do { library = try MusicLibrary(directory: configuration.stateDirectory) } catch {
                log("cannot open the library in \(configuration.stateDirectory ?? "memory") (\(error)); keeping it in memory")
                library = try? MusicLibrary(directory: nil)
            }
        }
        self.library = library
        core = .makeBoxSendingValue(HouseCore(configuration: configuration, loop: loop, clock: clock, log: log, library: library,
                                              clockSessions: clockSessions), eventLoop: loop)
        let core = self.core
        loop.execute { core.value.started() }
    }

    // MARK: On the loop

    /// Performs `request`; `respond` is called once, on the loop, at once or when the engine
    /// has applied an edit. On the loop.
    public func control(_ request: ControlRequest, respond: @escaping Respond) {
        core.value.control(request, respond: respond)
    }

    /// Performs `command` on the default group (or on no group). On the loop.
    public func control(_ command: ControlCommand, respond: @escaping Respond) {
        control(ControlRequest(command), respond: respond)
    }

    /// Takes up the streams the groups were playing when the house stopped (see
    /// `GroupSession.resumeStoredStream`). Call once, on the loop, before rooms connect.
    public func resumeStoredStreams() {
        core.value.resumeStoredStreams()
    }

    /// Stops every group's production and the library's watcher. On the loop.
    public func stop() {
        core.value.stop()
    }

    // MARK: From any thread

    /// Whether `code` is an outstanding pairing code (`pair-controller`); a code is taken once.
    /// Ten wrong codes void every outstanding one, with a line in the log.
    public func redeemPairingCode(_ code: String) async -> Bool {
        let core = self.core
        // A house whose loop has stopped signs no one in.
        return (try? await loop.submit {
            let house = core.value
            switch house.pairing.redeem(code, now: house.now) {
            case .accepted:
                house.log("a browser signed in with a pairing code")
                return true
            case .refused:
                return false
            case .voided:
                house.log("\(ControllerPairing.maximumFailures) wrong pairing codes tried: every outstanding code is void; ask for a new one with tutti ctl pair-controller")
                return false
            }
        }.get()) ?? false
    }

    /// Performs `command` on `group` (by name or id; nil: the default group) from any thread:
    /// the house answers on its loop, at once or once the engine has applied an edit.
    public func perform(_ command: ControlCommand, group: String? = nil) async -> Result<ControlReply, ControlRefusal> {
        let request = ControlRequest(command, group: group)
        let core = self.core
        return await withCheckedContinuation { continuation in
            loop.execute { core.value.control(request) { continuation.resume(returning: $0) } }
        }
    }
}
