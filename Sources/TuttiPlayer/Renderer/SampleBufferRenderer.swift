import Dispatch
import Foundation
import TuttiCore
import TuttiMedia

/// Plays audio the app enqueues itself, at the presentation times it gives, on the timeline
/// of a `RenderSynchronizer`: Tutti's AVSampleBufferAudioRenderer.
///
/// **Media.** `enqueue(_:)` takes PCM (`PCMBuffer`) at any rate and channel count; other
/// formats are converted to `format` (libsoxr, one resampler per contiguous run, so the joins of
/// a run are continuous). `enqueue(_:description:presentationTime:)` takes compressed packets
/// from `AudioStreamParser` and decodes them. Presentation times are rounded to the nearest
/// output frame; within a run, frames follow each other exactly.
///
/// **Order, gaps and overlaps.** Media must be enqueued in presentation order: gaps between
/// buffers play as silence, and media that starts before the end of media enqueued earlier is
/// *refused* (`SampleBufferRendererError.overlapsEnqueuedMedia`) and changes nothing. To replace
/// media, flush it first (`flush(fromSourceTime:completion:)`), then enqueue from that time.
/// Media enqueued for times the timeline has already played is dropped.
///
/// **Demand.** The route decides how far ahead the renderer wants media
/// (`RenderRoute.forwardBufferDuration`): about 2 s for a local device, minutes for remote
/// rooms. `isReadyForMoreMediaData` is true while less than that lies between the playhead and
/// the end of the enqueued media.
///
/// **Real-time path.** Only `route.realTimeLead` (0.2 s by default) of media is committed to a
/// preallocated lock-free ring that the device's render thread reads; the rest waits in
/// ordinary memory, where a flush can still remove it. A feeder thread (the synchronizer's)
/// moves media into the ring as the device plays.
///
/// **Flushes.** `flush()` drops everything at once. `flush(fromSourceTime:completion:)` drops
/// media from a time on, but only if that time is at least `route.flushLeadTime` past the
/// playhead and beyond everything already committed to the ring; otherwise it refuses and
/// playback stays intact.
///
/// Thread-safety: every method may be called from any thread. Enqueues and flushes are
/// serialised; a media-request block runs on the queue given for it.
public final class SampleBufferRenderer: @unchecked Sendable {
    /// The renderer's output format: the device's rate and channel count (Float32, interleaved).
    public let format: AudioFormat
    public let route: any RenderRoute
    public let resamplerQuality: Resampler.Quality

    let ring: RendererRing
    private let leadFrames: Int64

    // Enqueue side, guarded by `enqueueLock` (always taken before `stateLock`): conversion and
    // decoding can take milliseconds and must not hold up the feeder.
    private let enqueueLock = NSLock()
    private let conversion: RendererConversion
    private var packetRun: PacketRun?

    // Shared state, guarded by `stateLock`.
    private let stateLock = NSLock()
    private var pending: RendererPendingMedia
    /// Exact end (in source time) of the media enqueued since the last flush.
    private var enqueuedEnd: MediaTime?
    private var enqueueCount = 0
    private var synchronizer: SynchronizerCore?
    /// Device frame up to which the ring's content is planned; nil: plan from the render position.
    private var planCursor: Int64?
    /// Device frame after the last frame written to the ring, if the next may continue its run.
    private var writtenDeviceEnd: Int64?
    /// Media committed to the ring: the end of what each plan wrote, by the ring position at
    /// which that plan's frames end, until the render thread has read past them.
    private var committedPlans: [(ringEnd: Int, mediaEnd: Int64)] = []
    private var currentPlanMediaEnd: Int64 = .min
    private var request: MediaRequest?
    private var requestSerial = 0

    private struct MediaRequest {
        let id: Int
        let queue: DispatchQueue
        let block: @Sendable () -> Void
        /// A call (or an idle retry) is on its way; at most one at a time.
        var scheduled = false
    }

    /// The decoding state of a run of contiguous packets.
    private struct PacketRun {
        let description: StreamDescription
        let decoder: ParsedPacketDecoder
        /// Where the next packet must start to continue the run (nil: unknown, assume it does).
        var nextPacketTime: MediaTime?
        /// Presentation time of the next decoded frame.
        var outputTime: MediaTime
        /// Priming frames still to drop.
        var skip: Int
        /// Real frames still to keep before the end padding (nil: keep all).
        var remaining: Int64?
        var format: AudioFormat { AudioFormat(sampleRate: description.sampleRate, channelCount: description.channelCount) }
    }

    /// - Parameters:
    ///   - format: the output's rate and channel count; must match the device it plays on.
    ///   - route: where the audio goes; sets the demand and the flush lead.
    public init(format: AudioFormat, route: any RenderRoute, resamplerQuality: Resampler.Quality = .high) {
        self.format = AudioFormat(sampleRate: format.sampleRate, channelCount: format.channelCount)
        self.route = route
        self.resamplerQuality = resamplerQuality
        leadFrames = max(route.realTimeLead.frame(atSampleRate: format.sampleRate, rounding: .up), 1)
        // Room for the lead plus the periods the render thread may be behind the planner.
        ring = RendererRing(channelCount: format.channelCount, capacityFrames: Int(leadFrames) + format.sampleRate / 5)
        conversion = RendererConversion(output: self.format, quality: resamplerQuality)
        pending = RendererPendingMedia(channelCount: format.channelCount, mergeLimitFrames: format.sampleRate)
    }

    /// A renderer for a local device, in the device's format.
    public convenience init(route: LocalDeviceRoute, resamplerQuality: Resampler.Quality = .high) {
        self.init(format: route.device.format, route: route, resamplerQuality: resamplerQuality)
    }

    // MARK: Enqueueing

    /// Enqueues PCM to play at `buffer.presentationTime`, converting it to `format` if needed.
    /// - Throws: `.overlapsEnqueuedMedia` if it starts before the end of the media enqueued
    ///   before it (nothing is enqueued then); `.media` if it cannot be converted.
    public func enqueue(_ buffer: PCMBuffer) throws(SampleBufferRendererError) {
        enqueueLock.lock()
        defer { enqueueLock.unlock() }
        guard !buffer.isEmpty else { return }
        if let end = stateLock.withLock({ enqueuedEnd }), buffer.presentationTime < end {
            throw .overlapsEnqueuedMedia(presentationTime: buffer.presentationTime, enqueuedEnd: end)
        }
        // PCM after packets: the packet run is over.
        try endPacketRun()
        try enqueueConverted(buffer)
    }

    /// Enqueues one compressed packet of a parsed stream (`AudioStreamParser`), decoded here.
    ///
    /// `presentationTime` is where the packet's first decoded frame plays. Packets that follow
    /// each other (the next one's presentation time is this one's plus its `frameCount`) form a
    /// run decoded by one decoder. At the start of a stream (a packet whose `timestamp` is 0 or
    /// unknown starts a run) the description's `encoderDelay` priming frames are dropped, and
    /// with a known `totalFrames` the `encoderPadding` at the end as well: give the first packet
    /// the presentation time `−encoderDelay` frames for the first real frame to play at zero.
    /// - Throws: as `enqueue(_:)`, and `.media` when the stream cannot be decoded.
    public func enqueue(_ packet: StreamPacket, description: StreamDescription, presentationTime: MediaTime) throws(SampleBufferRendererError) {
        enqueueLock.lock()
        defer { enqueueLock.unlock() }
        let continues = packetRun.map { $0.description == description && ($0.nextPacketTime.map { $0 == presentationTime } ?? true) } ?? false
        if !continues {
            try endPacketRun()
            if let end = stateLock.withLock({ enqueuedEnd }), presentationTime < end {
                throw .overlapsEnqueuedMedia(presentationTime: presentationTime, enqueuedEnd: end)
            }
            let decoder: ParsedPacketDecoder
            do { decoder = try ParsedPacketDecoder(description) } catch { throw .media(error) }
            let startsStream = (packet.timestamp ?? 0) <= 0
            let delay = startsStream ? description.encoderDelay ?? 0 : 0
            var remaining: Int64? = nil
            if startsStream, let total = description.totalFrames {
                remaining = max(0, total - Int64(delay) - Int64(description.encoderPadding ?? 0))
            }
            packetRun = PacketRun(description: description, decoder: decoder, nextPacketTime: nil, outputTime: presentationTime,
                                  skip: delay, remaining: remaining)
        }
        var decoded: [Float] = []
        packetRun!.decoder.decode(packet.bytes, appendingTo: &decoded)
        packetRun!.nextPacketTime = packet.frameCount.map { presentationTime + MediaTime(frame: Int64($0), sampleRate: description.sampleRate) }
        try placeDecoded(decoded)
    }

    /// Ends the current contiguous run: what the resampler's filter or the decoder still holds
    /// is enqueued now. Call it after the last media of a stream; a buffer that does not continue
    /// the run ends it implicitly.
    public func endContiguousRun() throws(SampleBufferRendererError) {
        enqueueLock.lock()
        defer { enqueueLock.unlock() }
        try endPacketRun()
        if let tail = conversion.endRun() { insert([tail], end: nil) }
    }

    /// Caller holds `enqueueLock`.
    private func endPacketRun() throws(SampleBufferRendererError) {
        guard let run = packetRun else { return }
        var decoded: [Float] = []
        run.decoder.finish(appendingTo: &decoded)
        try placeDecoded(decoded)
        packetRun = nil
    }

    /// Drops priming and padding from decoded frames and enqueues the rest at their place.
    /// Caller holds `enqueueLock`.
    private func placeDecoded(_ samples: [Float]) throws(SampleBufferRendererError) {
        guard var run = packetRun else { return }
        let channels = run.description.channelCount
        let frames = samples.count / channels
        guard frames > 0 else { return }
        let first = min(run.skip, frames)
        run.skip -= first
        var last = frames
        if let remaining = run.remaining {
            last = first + Int(min(Int64(frames - first), remaining))
            run.remaining = remaining - Int64(last - first)
        }
        let start = run.outputTime + MediaTime(frame: Int64(first), sampleRate: run.description.sampleRate)
        run.outputTime = run.outputTime + MediaTime(frame: Int64(frames), sampleRate: run.description.sampleRate)
        packetRun = run
        guard last > first else { return }
        let piece = first == 0 && last == frames ? samples : Array(samples[(first * channels)..<(last * channels)])
        try enqueueConverted(PCMBuffer(format: run.format, samples: piece, presentationTime: start))
    }

    /// Caller holds `enqueueLock`.
    private func enqueueConverted(_ buffer: PCMBuffer) throws(SampleBufferRendererError) {
        let placed: [RendererConversion.Placed]
        do { placed = try conversion.convert(buffer) } catch { throw .media(error) }
        insert(placed, end: buffer.presentationTime + buffer.duration)
    }

    /// Adds converted media to the pending queue; re-plans the ring if it lands where the
    /// feeder has already planned silence.
    private func insert(_ placed: [RendererConversion.Placed], end: MediaTime?) {
        stateLock.withLock {
            for piece in placed {
                let frames = Int64(piece.samples.count / format.channelCount)
                pending.insert(start: piece.startFrame, samples: piece.samples)
                if let synchronizer, let cursor = planCursor {
                    let renderPosition = synchronizer.renderPosition.load(ordering: .acquiring)
                    if let device = synchronizer.timeline.firstDeviceFrame(playing: piece.startFrame..<(piece.startFrame + frames), notBefore: renderPosition),
                       device < cursor {
                        replanLocked(from: device)
                    }
                }
            }
            if let end { enqueuedEnd = enqueuedEnd.map { max($0, end) } ?? end }
            enqueueCount += 1
        }
    }

    // MARK: Readiness and media requests

    /// True while less than the route's `forwardBufferDuration` of media is enqueued beyond
    /// the playhead.
    public var isReadyForMoreMediaData: Bool {
        let playhead = playheadTime()
        return stateLock.withLock { isReadyLocked(playhead: playhead) }
    }

    /// Media enqueued beyond the playhead (zero when none).
    public var bufferedDuration: MediaTime {
        let playhead = playheadTime()
        return stateLock.withLock { max(.zero, (enqueuedEnd ?? playhead) - playhead) }
    }

    private func isReadyLocked(playhead: MediaTime) -> Bool {
        (enqueuedEnd ?? playhead) - playhead < route.forwardBufferDuration
    }

    /// The playhead: the synchronizer's current time, or zero while not attached to one.
    private func playheadTime() -> MediaTime {
        stateLock.withLock { synchronizer }?.currentTime() ?? .zero
    }

    /// Calls `block` on `queue` repeatedly while the renderer is ready for more media; the block
    /// should enqueue until `isReadyForMoreMediaData` is false or it has nothing more. Calls
    /// never overlap. When a call enqueues nothing, the next comes after a short pause (10 ms),
    /// not at once. Replaces any earlier request.
    public func requestMediaDataWhenReady(on queue: DispatchQueue, using block: @escaping @Sendable () -> Void) {
        stateLock.withLock {
            requestSerial += 1
            request = MediaRequest(id: requestSerial, queue: queue, block: block)
        }
        pokeMediaRequest()
    }

    /// No more calls of the request block after any one already running.
    public func stopRequestingMediaData() {
        stateLock.withLock { request = nil }
    }

    /// Schedules the request block if the renderer is ready and no call is on its way. Called
    /// whenever readiness may have changed: the playhead moved (feeder), a flush, a new request.
    func pokeMediaRequest() {
        let playhead = playheadTime()
        let scheduled: (Int, DispatchQueue)? = stateLock.withLock {
            guard var current = request, !current.scheduled, isReadyLocked(playhead: playhead) else { return nil }
            current.scheduled = true
            request = current
            return (current.id, current.queue)
        }
        if let (id, queue) = scheduled { queue.async { self.serveMediaRequest(id) } }
    }

    private func serveMediaRequest(_ id: Int) {
        guard let (block, before) = stateLock.withLock({ request?.id == id ? (request!.block, enqueueCount) : nil }) else { return }
        block()
        let playhead = playheadTime()
        enum Next { case now, later, wait }
        let next: (Next, DispatchQueue)? = stateLock.withLock {
            guard var current = request, current.id == id else { return nil }
            if !isReadyLocked(playhead: playhead) {
                current.scheduled = false
                request = current
                return (.wait, current.queue)
            }
            return (enqueueCount != before ? .now : .later, current.queue)
        }
        switch next {
        case (.now, let queue)?: queue.async { self.serveMediaRequest(id) }
        case (.later, let queue)?: queue.asyncAfter(deadline: .now() + .milliseconds(10)) { self.serveMediaRequest(id) }
        default: break
        }
    }

    // MARK: Flushing

    /// Drops all media, enqueued and committed. The device plays silence from its next period
    /// on (what its own buffer already holds, a few milliseconds, still plays). Conversion runs
    /// end without their tails.
    public func flush() {
        enqueueLock.lock()
        defer { enqueueLock.unlock() }
        conversion.reset()
        packetRun = nil
        stateLock.withLock {
            pending.removeAll()
            enqueuedEnd = nil
            committedPlans.removeAll()
            currentPlanMediaEnd = .min
            if synchronizer != nil {
                ring.kill(fromDeviceFrame: .min)
                planCursor = nil
                writtenDeviceEnd = nil
            }
        }
        pokeMediaRequest()
    }

    /// Drops the media from `fromSourceTime` on, if that is still possible, so the app can
    /// enqueue different media from that time (a queue edit, a new next track).
    ///
    /// The rule: the flush is honoured when `fromSourceTime` is at least `route.flushLeadTime`
    /// past the playhead *and* at or beyond the end of the media already committed to the
    /// real-time ring. Then every enqueued frame from that time on is dropped (a buffer that
    /// straddles it is cut there, sample-exactly), runs end there, and `completion(true)` is
    /// called; the next media enqueued may start at `fromSourceTime`. Otherwise nothing
    /// changes, playback continues intact, and `completion(false)` is called: fall back to
    /// `flush()` or leave the media as it is.
    ///
    /// `completion` is called on the calling thread before this method returns.
    public func flush(fromSourceTime: MediaTime, completion: @escaping @Sendable (Bool) -> Void) {
        let playhead = playheadTime()
        enqueueLock.lock()
        let frame = fromSourceTime.frame(atSampleRate: format.sampleRate, rounding: .toNearestOrAwayFromZero)
        var accepted = fromSourceTime >= playhead + route.flushLeadTime
            && stateLock.withLock({ frame >= committedMediaEndLocked() })
        if accepted {
            // The runs end here: their held-back frames belong before the cut (or are cut).
            do throws(SampleBufferRendererError) { try endPacketRun() } catch { packetRun = nil }
            if let tail = conversion.endRun() { insert([tail], end: nil) }
            accepted = stateLock.withLock {
                // The feeder may have committed more while the runs ended.
                guard frame >= committedMediaEndLocked() else { return false }
                pending.trim(from: frame)
                if let end = enqueuedEnd, end > fromSourceTime { enqueuedEnd = fromSourceTime }
                return true
            }
        }
        enqueueLock.unlock()
        if accepted { pokeMediaRequest() }
        completion(accepted)
    }

    /// The media frame after the last one committed to the ring and not yet read past by the
    /// render thread. Caller holds `stateLock`.
    private func committedMediaEndLocked() -> Int64 {
        let read = ring.frames.totalFramesRead
        committedPlans.removeAll { $0.ringEnd <= read }
        return committedPlans.reduce(currentPlanMediaEnd) { max($0, $1.mediaEnd) }
    }

    // MARK: Synchronizer side

    /// Attaches to a synchronizer. Whatever an earlier attachment left in the ring is withdrawn.
    func attach(to core: SynchronizerCore) {
        stateLock.withLock {
            precondition(synchronizer == nil, "a renderer belongs to one synchronizer at a time")
            synchronizer = core
            ring.kill(fromDeviceFrame: .min)
            planCursor = nil
            writtenDeviceEnd = nil
            committedPlans.removeAll()
            currentPlanMediaEnd = .min
        }
        pokeMediaRequest()
    }

    func detach() {
        stateLock.withLock {
            synchronizer = nil
            planCursor = nil
            writtenDeviceEnd = nil
        }
    }

    /// The timeline changes at device frame `deviceFrame`: anything planned from there on is
    /// withdrawn and planned again.
    func replan(from deviceFrame: Int64) {
        stateLock.withLock { replanLocked(from: deviceFrame) }
    }

    private func replanLocked(from deviceFrame: Int64) {
        guard synchronizer != nil else { return }
        // What was committed so far counts until the render thread has read past it, even when
        // nothing needs withdrawing: after a jump back its media lies ahead of the new playhead.
        if currentPlanMediaEnd != .min { committedPlans.append((ring.producerRingPosition, currentPlanMediaEnd)) }
        currentPlanMediaEnd = .min
        guard let cursor = planCursor, deviceFrame < cursor else { return }
        ring.kill(fromDeviceFrame: deviceFrame)
        planCursor = deviceFrame
        writtenDeviceEnd = nil
    }

    /// Feeder thread: drops media the device has played and commits the next `realTimeLead`
    /// of the timeline to the ring.
    func feed() {
        stateLock.withLock {
            guard let core = synchronizer else { return }
            let renderPosition = core.renderPosition.load(ordering: .acquiring)
            let timeline = core.timeline
            pending.drop(before: timeline.earliestMediaStillToPlay(fromDeviceFrame: renderPosition))
            let horizon = renderPosition + leadFrames
            var device = max(planCursor ?? renderPosition, renderPosition)
            while device < horizon {
                let anchor = timeline.anchor(at: device)
                let segmentEnd = min(horizon, timeline.nextAnchor(after: device)?.deviceFrame ?? horizon)
                if anchor.rate == 1 {
                    let media = anchor.mediaFrame + (device - anchor.deviceFrame)
                    let segmentDevice = device
                    let range = media..<(media + (segmentEnd - device))
                    let stopped = pending.forEachRun(in: range) { start, samples in
                        let target = segmentDevice + (start - media)
                        let written = ring.write(samples.baseAddress!, frames: samples.count / format.channelCount,
                                                 deviceFrame: target, continuesRun: writtenDeviceEnd == target)
                        if written > 0 {
                            writtenDeviceEnd = target + Int64(written)
                            currentPlanMediaEnd = max(currentPlanMediaEnd, start + Int64(written))
                        }
                        return written
                    }
                    if stopped < range.upperBound {
                        // The ring is full: carry on from here next time.
                        planCursor = device + (stopped - media)
                        return
                    }
                }
                device = segmentEnd
            }
            planCursor = horizon
        }
    }
}
