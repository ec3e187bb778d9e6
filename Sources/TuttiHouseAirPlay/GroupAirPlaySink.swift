import Synchronization
import TuttiHouse
import TuttiProtocol

/// An AirPlay sender's stream into a group of the house (`LiveInput`): the group plays it in
/// place of its queue, at the times the sender asked for, and goes back to its queue, paused,
/// when it ends.
///
/// It turns AirPlay's terms into the house's: 16-bit samples into floats, RTP's 32-bit
/// timestamps (which wrap every 27 hours at 44.1 kHz) into a frame count that does not, the
/// sender's dB volume into the group's percent.
public final class GroupAirPlaySink: AirPlaySink {
    private let input: LiveInput
    /// The last RTP timestamp seen and the unwrapped frame it stands for.
    private let unwrapped = Mutex<(rtp: UInt32, frame: Int64)?>(nil)

    public init(input: LiveInput) {
        self.input = input
    }

    /// The frame count an RTP timestamp stands for: the nearest to the last one seen that
    /// has these low 32 bits.
    private func frame(of rtp: UInt32) -> Int64 {
        unwrapped.withLock { last in
            guard let previous = last else {
                last = (rtp, Int64(rtp))
                return Int64(rtp)
            }
            let frame = previous.frame + Int64(Int32(bitPattern: rtp &- previous.rtp))
            last = (rtp, frame)
            return frame
        }
    }

    public func airPlayBegan(_ stream: AirPlayStreamInfo) {
        unwrapped.withLock { $0 = nil }
        input.began(LiveSourceInfo(kind: "airplay", sender: stream.sender, senderName: stream.senderName,
                                   sampleRate: stream.announcement.sampleRate, channelCount: stream.announcement.channelCount))
    }

    public func airPlayAudio(_ samples: [Int16], frameCount: Int, rtpTimestamp: UInt32) {
        let floats = samples.map { Float($0) * (1 / 32768) }
        input.audio(floats, frames: frameCount, sourceFrame: frame(of: rtpTimestamp))
    }

    public func airPlaySchedule(rtpTime: UInt32, hostTime: Int64, errorNanoseconds: Double) {
        input.schedule(sourceFrame: frame(of: rtpTime), hostTime: hostTime)
    }

    public func airPlayVolume(_ decibels: Double) {
        input.volume(percent: Self.percent(decibels: decibels))
    }

    /// AirPlay's volume (−30 dB quietest to 0 dB, −144 mute) as the group's percent, at the
    /// level the sender asked for: a room's gain is 0.6 dB a percent below 100 % (60 dB across
    /// the scale), so −30 dB is 50 % and anything below it, or mute, silence.
    public static func percent(decibels: Double) -> Int {
        guard decibels >= -30 else { return 0 }
        return Int((100 + min(0, decibels) / 0.6).rounded())
    }

    public func airPlayMetadata(_ metadata: AirPlayMetadata) {
        if metadata.title != nil || metadata.artist != nil || metadata.album != nil {
            input.metadata(title: metadata.title, artist: metadata.artist, album: metadata.album)
        }
        if let progress = metadata.progress {
            // RTP times at 44.1 kHz, wrapping at 2^32: from the item's start to the frame sent
            // now, and to its end.
            let rate = 44_100.0
            input.progress(positionSeconds: Double(progress.current &- progress.start) / rate, durationSeconds: Double(progress.end &- progress.start) / rate)
        }
        if let artwork = metadata.artwork {
            input.artwork(artwork, type: metadata.artworkType ?? "image/jpeg")
        }
    }

    public func airPlayFlushed() {
        input.flushed()
    }

    public func airPlayEnded(_ reason: String) {
        input.ended(reason)
    }
}
