import Crypto
import NIOEmbedded
import TuttiCore
import TuttiDevices
import TuttiProtocol
import TuttiSpeaker

/// A room's sound card in the simulated house: a crystal that emits frame `n` at its
/// `EmissionSchedule` time on the true clock, pulling each period from the room's `Playout`
/// `leadNanoseconds` before it leaves the DAC (as a real room's playout thread keeps its ring
/// ahead). It keeps what it emitted, with the true time of each period, and a SHA-256 digest.
///
/// Thread-safety: the simulation's event loop only.
final class SimulatedSoundCard {
    let playout: Playout
    let schedule: EmissionSchedule
    /// The room's own clock, in which the playout is told when each frame is emitted.
    let roomClock: SkewedClock
    let leadNanoseconds: Int64
    let keepsAudio: Bool
    private let loop: EmbeddedEventLoop
    private(set) var nextFrame: Int64 = 0
    private(set) var samples: [Float] = []
    private(set) var periodFrames: [Int64] = []
    private(set) var periodTimes: [Int64] = []
    private var hash = SHA256()
    private var stopped = false

    init(playout: Playout, schedule: EmissionSchedule, roomClock: SkewedClock, leadNanoseconds: Int64, keepsAudio: Bool, loop: EmbeddedEventLoop) {
        self.playout = playout
        self.schedule = schedule
        self.roomClock = roomClock
        self.leadNanoseconds = leadNanoseconds
        self.keepsAudio = keepsAudio
        self.loop = loop
    }

    var digest: String { hash.finalize().map { String(format: "%02x", $0) }.joined() }

    func start() { scheduleNextPeriod() }

    func stop() { stopped = true }

    private func scheduleNextPeriod() {
        let due = schedule.time(ofFrame: nextFrame) - leadNanoseconds
        loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(max(due, Int64(loop.now.uptimeNanoseconds))))) { [self] in
            guard !stopped else { return }
            renderPeriod()
            scheduleNextPeriod()
        }
    }

    /// Where the card's frames land on the room's clock: exact, as a position report of a real
    /// card fitted over time would be.
    private func deviceMap(at frame: Int64) -> LinearTimeMap {
        let nanosecondsPerFrame = 1e9 / schedule.effectiveRate * (1 + Double(roomClock.driftPartsPerBillion) / 1e9)
        return LinearTimeMap(referenceFrame: frame, referenceTime: roomClock.reading(atBase: schedule.time(ofFrame: frame)),
                             nanosecondsPerFrame: nanosecondsPerFrame)
    }

    private func renderPeriod() {
        playout.render(firstFrame: nextFrame, device: deviceMap(at: nextFrame))
        playout.block.withUnsafeBytes { hash.update(bufferPointer: $0) }
        if keepsAudio {
            samples += playout.block
            periodFrames.append(nextFrame)
            periodTimes.append(schedule.time(ofFrame: nextFrame))
        }
        nextFrame += Int64(playout.blockFrames)
    }
}
