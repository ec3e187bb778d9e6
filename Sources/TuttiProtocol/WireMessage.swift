
/// The messages of Tutti's TCP protocol (version 8), between the house server and speakers or
/// controllers. Audio and control travel over TCP, inside the secure channel
/// (`SecureChannelHandler`); clock sync has its own UDP packets (`ClockSyncPacket`). See
/// docs/MULTIROOM.md for the conversation and docs/SECURITY.md for the channel.
public enum WireMessage: Sendable, Equatable {
    /// First message on every connection, from the client.
    case hello(Hello)
    /// The server's answer to `hello`.
    case welcome(Welcome)
    /// A controller's answer to its welcome's challenge: `ControllerToken.proof(for:)`. The
    /// house takes no control request from a connection before it.
    case authenticate(proof: [UInt8])
    /// A new stream: its codec and format. Audio chunks of this stream follow.
    case streamStart(StreamStart)
    /// One encoded chunk of a stream, placed on the stream's timeline.
    case audioChunk(AudioChunk)
    /// Maps the timeline to the server clock: `timelineFrame` is heard at `serverTime` and the
    /// timeline advances at `rate` (1 playing, 0 paused), like AirPlay 2's SETRATEANCHORTIME.
    case anchor(Anchor)
    /// Drop buffered audio of `streamID` from `fromFrame` on (`Int64.min`: everything).
    case flush(Flush)
    /// No audio of the stream exists at or after `endFrame`: play out and stop there.
    case streamEnd(StreamEnd)
    /// Set the room's volume, ramping over `rampNanoseconds`.
    case volume(Volume)
    /// A speaker's periodic report.
    case speakerStatus(SpeakerStatus)
    /// A control command from a controller (`tutti ctl`), JSON-encoded.
    case controlRequest(ControlRequest)
    case controlResponse(ControlResponse)
    /// Either side is closing, with a reason.
    case goodbye(reason: String)
    /// House → speaker: what the house calls this room and the latency it compensates, set by
    /// a controller (`room-rename`, `room-latency`); sent when they differ from its hello.
    case roomSettings(RoomSettings)
    /// House → speaker, after its welcome: whether the house admits it. A speaker the house does
    /// not know waits (and is sent nothing else) until `tutti ctl admit`; then it is told it is
    /// admitted, remembers the house, and the stream follows.
    case admission(Admission)

    public struct Admission: Sendable, Equatable {
        public var isAdmitted: Bool
        /// While waiting: the code the house shows beside it (`AdmissionCode`).
        public var code: String
        public init(isAdmitted: Bool, code: String = "") {
            self.isAdmitted = isAdmitted
            self.code = code
        }
    }

    public struct Hello: Sendable, Equatable {
        public enum Role: UInt8, Sendable { case speaker = 1, controller = 2 }
        public var role: Role
        public var protocolVersion: UInt16
        public var name: String
        /// Audio codecs the client decodes, by wire name, most preferred first.
        public var codecs: [String]
        /// Fixed acoustic delay after the DAC (amplifier, speaker), which the speaker compensates.
        public var latencyNanoseconds: Int64
        /// The speaker's output lead: how long before a frame leaves its DAC the speaker commits
        /// it to its device (its ring's lead plus the device's buffer). An anchor that reaches it
        /// later than that before it is heard cannot be heard from its first frame, so the house
        /// schedules anchors at least this far (plus the latency) ahead.
        public var outputLeadNanoseconds: Int64
        /// What a reconnecting speaker still holds, so the house sends only what it lacks.
        public var resume: Resume?

        /// The longest latency or output lead a hello may state: a room further behind than
        /// this is not a room the house can keep in sync with the others.
        public static let maximumDelayNanoseconds: Int64 = 10_000_000_000

        public init(role: Role, protocolVersion: UInt16 = WireProtocol.version, name: String, codecs: [String] = [], latencyNanoseconds: Int64 = 0,
                    outputLeadNanoseconds: Int64 = 0, resume: Resume? = nil) {
            self.role = role
            self.protocolVersion = protocolVersion
            self.name = name
            self.codecs = codecs
            self.latencyNanoseconds = latencyNanoseconds
            self.outputLeadNanoseconds = outputLeadNanoseconds
            self.resume = resume
        }
    }

    /// A speaker's buffer as it reconnects: the stream, the last cut it was told of (its
    /// epoch), and the timeline ranges of audio it holds (at most `maximumRanges`, in order).
    public struct Resume: Sendable, Equatable {
        public static let maximumRanges = 8
        public var streamID: UInt32
        public var epoch: UInt32
        public var held: [Range<Int64>]
        public init(streamID: UInt32, epoch: UInt32, held: [Range<Int64>]) {
            self.streamID = streamID
            self.epoch = epoch
            self.held = held
        }
    }

    public struct Welcome: Sendable, Equatable {
        public var protocolVersion: UInt16
        public var serverName: String
        /// The id the server gave this connection.
        public var clientID: UInt32
        /// For a controller: random bytes it must prove it holds the house's controller token
        /// for (`authenticate`). Empty for a speaker.
        public var challenge: [UInt8]
        public init(protocolVersion: UInt16 = WireProtocol.version, serverName: String, clientID: UInt32, challenge: [UInt8] = []) {
            self.protocolVersion = protocolVersion
            self.serverName = serverName
            self.clientID = clientID
            self.challenge = challenge
        }
    }

    public struct StreamStart: Sendable, Equatable {
        public var streamID: UInt32
        public var codec: String
        public var sampleRate: UInt32
        public var channelCount: UInt8
        public var codecHeader: [UInt8]
        /// The stream's epoch (cuts made so far) as of the audio that follows.
        public var epoch: UInt32
        public init(streamID: UInt32, codec: String, sampleRate: UInt32, channelCount: UInt8, codecHeader: [UInt8], epoch: UInt32 = 0) {
            self.streamID = streamID
            self.codec = codec
            self.sampleRate = sampleRate
            self.channelCount = channelCount
            self.codecHeader = codecHeader
            self.epoch = epoch
        }
    }

    public struct AudioChunk: Sendable, Equatable {
        public var streamID: UInt32
        public var firstFrame: Int64
        public var frameCount: UInt32
        public var payload: [UInt8]
        public init(streamID: UInt32, firstFrame: Int64, frameCount: UInt32, payload: [UInt8]) {
            self.streamID = streamID
            self.firstFrame = firstFrame
            self.frameCount = frameCount
            self.payload = payload
        }
    }

    public struct Anchor: Sendable, Equatable {
        public var streamID: UInt32
        public var timelineFrame: Int64
        public var serverTime: Int64
        public var isPlaying: Bool
        public init(streamID: UInt32, timelineFrame: Int64, serverTime: Int64, isPlaying: Bool) {
            self.streamID = streamID
            self.timelineFrame = timelineFrame
            self.serverTime = serverTime
            self.isPlaying = isPlaying
        }
    }

    public struct Flush: Sendable, Equatable {
        public var streamID: UInt32
        public var fromFrame: Int64
        /// The stream's epoch after this cut: a reconnecting speaker says the last it saw.
        public var epoch: UInt32
        public init(streamID: UInt32, fromFrame: Int64, epoch: UInt32 = 0) {
            self.streamID = streamID
            self.fromFrame = fromFrame
            self.epoch = epoch
        }
    }

    public struct StreamEnd: Sendable, Equatable {
        public var streamID: UInt32
        public var endFrame: Int64
        public init(streamID: UInt32, endFrame: Int64) {
            self.streamID = streamID
            self.endFrame = endFrame
        }
    }

    public struct Volume: Sendable, Equatable {
        /// Linear gain 0…1.
        public var level: Float
        public var rampNanoseconds: Int64
        public init(level: Float, rampNanoseconds: Int64) {
            self.level = level
            self.rampNanoseconds = rampNanoseconds
        }
    }

    public struct RoomSettings: Sendable, Equatable {
        public var name: String
        /// Acoustic delay after the DAC to compensate (replaces the speaker's `--latency-ms`).
        public var latencyNanoseconds: Int64
        /// Which of the stream's channels the room plays (a stereo pair's halves play one each).
        public var channelMode: ChannelMode
        /// The largest latency a room may be given.
        public static let maximumLatencyNanoseconds: Int64 = 2_000_000_000
        public init(name: String, latencyNanoseconds: Int64, channelMode: ChannelMode = .stereo) {
            self.name = name
            self.latencyNanoseconds = latencyNanoseconds
            self.channelMode = channelMode
        }
    }

    public struct SpeakerStatus: Sendable, Equatable {
        public enum State: UInt8, Sendable { case idle = 0, buffering = 1, playing = 2, paused = 3 }
        public var state: State
        public var streamID: UInt32
        /// Timeline frame now leaving the speaker (acoustically), or -1.
        public var playheadFrame: Int64
        /// End of the contiguous audio the speaker holds from its playhead.
        public var bufferedUntilFrame: Int64
        /// Estimated error of this room's playout against the timeline, signed.
        public var syncErrorNanoseconds: Int64
        /// Estimated uncertainty of the clock-sync mapping.
        public var clockErrorNanoseconds: Int64
        public var underruns: UInt32
        /// How fast the stream arrived, in seconds of audio per second, once all of it has (0 before).
        public var fillRate: Float
        /// Why the room is silent or partly silent when it should play (a codec it cannot open,
        /// a corrupt chunk), in one line; empty when nothing is wrong.
        public var problem: String
        public init(state: State, streamID: UInt32, playheadFrame: Int64, bufferedUntilFrame: Int64, syncErrorNanoseconds: Int64,
                    clockErrorNanoseconds: Int64, underruns: UInt32, fillRate: Float = 0, problem: String = "") {
            self.state = state
            self.streamID = streamID
            self.playheadFrame = playheadFrame
            self.bufferedUntilFrame = bufferedUntilFrame
            self.syncErrorNanoseconds = syncErrorNanoseconds
            self.clockErrorNanoseconds = clockErrorNanoseconds
            self.underruns = underruns
            self.fillRate = fillRate
            self.problem = problem
        }
    }

    public struct ControlRequest: Sendable, Equatable {
        public var requestID: UInt32
        public var json: String
        public init(requestID: UInt32, json: String) {
            self.requestID = requestID
            self.json = json
        }
    }

    public struct ControlResponse: Sendable, Equatable {
        public var requestID: UInt32
        public var ok: Bool
        public var json: String
        public init(requestID: UInt32, ok: Bool, json: String) {
            self.requestID = requestID
            self.ok = ok
            self.json = json
        }
    }
}

public enum WireProtocol {
    /// 6: controllers authenticate (`Welcome.challenge`, `authenticate`).
    /// 7: everything in the secure channel; speakers are admitted (`admission`); clock-sync
    /// packets are authenticated.
    public static let version: UInt16 = 8
    /// "TT": the first two bytes of every frame.
    public static let magic: UInt16 = 0x5454
    /// Frame header: magic (2), version (1), type (1), payload length (4).
    public static let headerSize = 8
    /// Larger frames are refused: a chunk is a few hundred KiB at most.
    public static let defaultMaximumPayload = 4 << 20
}
