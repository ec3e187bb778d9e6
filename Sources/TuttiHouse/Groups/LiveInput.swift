import Synchronization
import TuttiProtocol

/// What a live source says of itself when it begins.
public struct LiveSourceInfo: Sendable, Equatable {
    /// The kind of source, as the status names it ("airplay").
    public var kind: String
    /// Who sends it (an address), and the name it gives, if any.
    public var sender: String
    public var senderName: String?
    /// Its audio: frames a second and channels, interleaved.
    public var sampleRate: Int
    public var channelCount: Int

    public init(kind: String, sender: String, senderName: String?, sampleRate: Int, channelCount: Int) {
        self.kind = kind
        self.sender = sender
        self.senderName = senderName
        self.sampleRate = sampleRate
        self.channelCount = channelCount
    }
}

/// A live source into one group of the house (an AirPlay sender): while it streams, the group
/// plays it in place of its queue, at the house times the source asks for, and when it ends
/// the group is back at its queue, paused where it was (`GroupSession+Live`).
///
/// Each call is carried to the house's loop in the order made, so the calls of one stream must
/// come from one thread at a time, in order (the AirPlay receiver's loop). A stream is what
/// lies between `began` and `ended`; a stream the group has let go of (a `play` or `pause` from
/// a controller took the group back) is not heard again: its later calls are dropped until the
/// next `began`.
///
/// Thread-safety: all members may be called from any thread.
public final class LiveInput: Sendable {
    private let house: House
    private let group: String?
    /// The stream `began` last started: the group takes calls of this stream only.
    private let generation = Atomic<UInt64>(0)

    /// A source into the group named (or numbered) `group`, the default group if nil.
    public init(house: House, group: String? = nil) {
        self.house = house
        self.group = group
    }

    private var key: LiveStreamKey { LiveStreamKey(input: ObjectIdentifier(self), generation: generation.load(ordering: .acquiring)) }

    /// Runs `body` on the house's loop with the group playing this input's current stream, if
    /// one still does.
    private func onGroup(_ body: @escaping @Sendable (GroupSession) -> Void) {
        let key = self.key, core = house.core
        house.loop.execute {
            let house = core.value
            guard let group = house.groups.values.first(where: { $0.live.map { $0.key == key && !$0.ended } ?? false }) else { return }
            group.whileAttached { body(group) }
        }
    }

    /// A stream begins: the group stops its queue (keeping where it was) and plays this.
    public func began(_ info: LiveSourceInfo) {
        let key = LiveStreamKey(input: ObjectIdentifier(self), generation: generation.add(1, ordering: .acquiringAndReleasing).newValue)
        let core = house.core, reference = group
        house.loop.execute {
            let house = core.value
            let target: GroupSession
            do { target = try reference.map { try house.group(named: $0) } ?? house.defaultGroup } catch {
                return house.log("\(info.kind) from \(info.sender): no group \(reference ?? "?") to play into (\(error)); its audio is not played")
            }
            target.whileAttached { target.beginLive(info, key: key) }
        }
    }

    /// The next frames, interleaved, in the source's rate and channels; `sourceFrame` is the
    /// first's number on the source's own count (it may start anywhere). A jump forward is
    /// silence; a jump back starts the timing again, as a flush does.
    public func audio(_ samples: [Float], frames: Int, sourceFrame: Int64) {
        onGroup { group in group.liveAudio(samples, frames: frames, sourceFrame: sourceFrame) }
    }

    /// Source frame `sourceFrame` is to be heard at `hostTime` on the house's clock.
    public func schedule(sourceFrame: Int64, hostTime: Int64) {
        onGroup { group in group.liveSchedule(sourceFrame: sourceFrame, hostTime: hostTime) }
    }

    /// The source's volume, 0–100: the group's volume.
    public func volume(percent: Int) {
        onGroup { group in group.liveVolume(percent) }
    }

    /// What plays, as the source describes it; a field left nil keeps what was said before.
    public func metadata(title: String?, artist: String?, album: String?) {
        onGroup { group in group.liveMetadata(title: title, artist: artist, album: album) }
    }

    /// The source dropped what it had sent (a pause, a seek): the rooms stop at the edit
    /// horizon, and the next audio is heard at the time its schedule says.
    public func flushed() {
        onGroup { group in group.liveFlushed() }
    }

    /// Where the source is in what it plays, as it says it (AirPlay's `progress`): seconds from
    /// its start to the frame sent now, and its length.
    public func progress(positionSeconds: Double, durationSeconds: Double) {
        guard positionSeconds.isFinite, durationSeconds.isFinite, positionSeconds >= 0, durationSeconds >= 0 else { return }
        onGroup { group in group.liveProgress(position: positionSeconds, duration: durationSeconds) }
    }

    /// The cover of what plays, as the source sends it (an image's bytes and MIME type).
    public func artwork(_ bytes: [UInt8], type: String) {
        onGroup { group in group.liveArtwork(bytes, type: type) }
    }

    /// The stream ended: what was sent is played out, then the group is back at its queue, paused.
    public func ended(_ reason: String) {
        onGroup { group in group.liveEnded(reason) }
    }
}

/// One stream of one `LiveInput`.
struct LiveStreamKey: Equatable {
    var input: ObjectIdentifier
    var generation: UInt64
}
