import Synchronization
import TuttiCore

/// Offline rendering: pulls periods as fast as the source delivers them and writes them to a
/// WAV file. Not paced; its position is simply the frames written. The exact frames of the
/// stream are written, with no padding after the last one.
public final class WAVFileDevice: OutputDevice, @unchecked Sendable {
    public let name: String
    public let format: AudioFormat
    public let periodFrames: Int
    public var bufferFrames: Int { 0 }
    @_spi(Testing) public var renderLoopObserver: RenderLoopObserver?
    public let path: String

    public let clock: any HostClock
    private let stopRequested = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let written = Atomic<Int64>(0)
    private var thread: DeviceThread?
    private var failure: DeviceError?

    public init(clock: any HostClock, path: String, format: AudioFormat, periodFrames: Int = 4096) {
        self.name = "wav:\(path)"
        self.path = path
        self.format = format
        self.periodFrames = periodFrames
        self.clock = clock
    }

    public var underrunCount: Int { 0 }
    public var isPaced: Bool { false }
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    public func start(source: any RenderSource) throws(DeviceError) {
        let writer = try WAVFileWriter(path: path, format: format)
        thread = DeviceThread(name: "tutti-wav", realtime: false) { [self] in
            renderLoopObserver?.didEnter()
            let buffer = UnsafeMutablePointer<Float>.allocate(capacity: periodFrames * format.channelCount)
            defer { buffer.deallocate() }
            do throws(DeviceError) {
                var total: Int64 = 0
                while !stopRequested.load(ordering: .relaxed) {
                    let result = source.render(into: buffer, frameCount: periodFrames, deviceFrame: total)
                    if result.frames > 0 {
                        try writer.write(buffer, frames: result.frames)
                        total += Int64(result.frames)
                        written.store(total, ordering: .releasing)
                    }
                    if result.endOfStream { break }
                    if result.frames == 0 { source.waitForFrames(timeoutNanoseconds: 50_000_000) }
                }
                try writer.close()
            } catch {
                failure = error
                try? writer.close()
            }
            renderLoopObserver?.willExit()
            finished.store(true, ordering: .releasing)
        }
    }

    public func stop() { stopRequested.store(true, ordering: .releasing) }

    public func waitUntilFinished() throws(DeviceError) {
        thread?.join()
        if let failure { throw failure }
    }

    public func position() -> DevicePosition {
        DevicePosition(framesEmitted: written.load(ordering: .acquiring), hostTime: clock.now())
    }
}
