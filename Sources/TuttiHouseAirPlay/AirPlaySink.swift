import TuttiProtocol

/// A sender's stream, as the receiver hands it on: to a group of the house, or to a test.
///
/// Calls come in the order things happened, from the receiver's tasks, never two at once for
/// one stream; they must return quickly (no blocking I/O).
public protocol AirPlaySink: Sendable {
    /// A sender set a stream up (`SETUP`); metadata, volume and its schedule may come before
    /// its first audio (pyatv sends them before `RECORD`). Every stream begun is ended.
    func airPlayBegan(_ stream: AirPlayStreamInfo)
    /// The next frames, interleaved, in order; `rtpTimestamp` is the first's. A packet lost for
    /// good comes as its frames of silence, at its place.
    func airPlayAudio(_ samples: [Int16], frameCount: Int, rtpTimestamp: UInt32)
    /// The sender's schedule: frame `rtpTime` is to be heard at `hostTime` on the receiver's
    /// clock (its sync packet, through the timing exchanges' fit of the sender's clock).
    func airPlaySchedule(rtpTime: UInt32, hostTime: Int64, errorNanoseconds: Double)
    /// The sender's volume: AirPlay's dB scale, −30 (quietest) to 0 (full), −144 for mute.
    func airPlayVolume(_ decibels: Double)
    /// What is playing, as the sender describes it (any field may be missing).
    func airPlayMetadata(_ metadata: AirPlayMetadata)
    /// The sender dropped what it had sent (a pause, a seek): frames before the next ones are void.
    func airPlayFlushed()
    /// The stream ended (`TEARDOWN`, the connection closed, or a failure), with why.
    func airPlayEnded(_ reason: String)
}

public struct AirPlayStreamInfo: Sendable, Equatable {
    public var announcement: RAOPAnnouncement
    /// The sender's address, and the name it gives (`X-Apple-Client-Name`, pyatv's none).
    public var sender: String
    public var senderName: String?

    public init(announcement: RAOPAnnouncement, sender: String, senderName: String?) {
        self.announcement = announcement
        self.sender = sender
        self.senderName = senderName
    }
}

public struct AirPlayMetadata: Sendable, Equatable {
    public var title: String?
    public var artist: String?
    public var album: String?
    /// The cover, as sent (JPEG or PNG), and its type.
    public var artwork: [UInt8]?
    public var artworkType: String?
    /// RTP times of the item's start, the current frame and its end (`progress`).
    public var progress: (start: UInt32, current: UInt32, end: UInt32)?

    public init() {}

    public static func == (lhs: AirPlayMetadata, rhs: AirPlayMetadata) -> Bool {
        lhs.title == rhs.title && lhs.artist == rhs.artist && lhs.album == rhs.album && lhs.artwork == rhs.artwork
            && lhs.artworkType == rhs.artworkType && lhs.progress?.start == rhs.progress?.start
            && lhs.progress?.current == rhs.progress?.current && lhs.progress?.end == rhs.progress?.end
    }
}
