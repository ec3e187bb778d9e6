import Synchronization
import TuttiCore
import TuttiMedia

/// The download task behind an `HLSByteSource`: loads the playlists, chooses the variant, and
/// appends the segments in media-sequence order to the `HLSSegmentBuffer`, measuring each
/// download and switching variants at segment boundaries.
///
/// Thread-safety: `start`, `cancel` and `status` may be used from any thread; the loop itself
/// runs on one task and keeps its state in local values.
final class HLSDownloader: Sendable {
    /// What the loop has chosen so far, for the source's properties.
    struct Status: Sendable {
        var candidates: [HLSVariant] = []
        var current: HLSVariant?
        var duration: MediaTime?
        var isLive = false
        var throughput: Double?
        var switches = 0
        var retries = 0
        /// What the loop is waiting for now, for a diagnosis of a stream that stopped.
        var phase = "starting"
    }

    let url: String
    let configuration: HLSByteSource.Configuration
    let buffer: HLSSegmentBuffer
    let fetcher: HLSFetcher
    let onEvent: (@Sendable (HLSByteSource.Event) -> Void)?
    let status = Mutex(Status())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(url: String, configuration: HLSByteSource.Configuration, buffer: HLSSegmentBuffer, fetcher: HLSFetcher,
         onEvent: (@Sendable (HLSByteSource.Event) -> Void)?) {
        self.url = url
        self.configuration = configuration
        self.buffer = buffer
        self.fetcher = fetcher
        self.onEvent = onEvent
    }

    func start() {
        task.withLock { task in
            if task == nil { task = Task(executorPreference: fetcher.executor) { await self.run() } }
        }
    }

    func cancel() {
        task.withLock { $0?.cancel() }
        buffer.cancel()
    }

    /// Where the loop stands. Local to the task.
    private struct Position {
        /// Ascending by bandwidth; empty for a media playlist opened directly.
        var candidates: [HLSVariant] = []
        var selector: HLSVariantSelector?
        var variant: HLSVariant?
        var playlist: HLSMediaPlaylist
        var playlistLoadedAt: ContinuousClock.Instant
        var playlistChanged = true
        var nextSequence: Int
        /// VOD playlists of other variants, which never change.
        var playlists: [String: HLSMediaPlaylist] = [:]
        /// Init sections fetched so far, with their compatibility signatures.
        var initSections: [HLSResource: (bytes: [UInt8], signature: [UInt8]?)] = [:]
        /// The init section in effect, and the signature of the one in the stream.
        var initSection: HLSResource?
        var streamSignature: [UInt8]?
        var appendedMedia = false
        var smoothedThroughput: Double?
    }

    private func run() async {
        do {
            var position = try await openStream()
            buffer.markOpened()
            try await downloadSegments(&position)
            buffer.finish()
            status.withLock { $0.phase = "finished" }
        } catch is CancellationError {
            status.withLock { $0.phase = "cancelled" }
        } catch let error as MediaError {
            buffer.fail(error)
            status.withLock { $0.phase = "failed: \(error.reason)" }
        } catch {
            buffer.fail(MediaError(.network, input: url, reason: "\(error)"))
            status.withLock { $0.phase = "failed: \(error)" }
        }
    }

    // MARK: Start

    private func openStream() async throws -> Position {
        var started = ContinuousClock.now
        let first = try await loadPlaylist(url)
        var candidates: [HLSVariant] = []
        var selector: HLSVariantSelector?
        var variant: HLSVariant?
        let media: HLSMediaPlaylist
        switch first {
        case .media(let playlist):
            media = playlist
        case .master(let master):
            var variants: [HLSVariant] = []
            for candidate in master.variants where !variants.contains(where: { $0.url == candidate.url }) { variants.append(candidate) }
            // An audio player has no use for video variants when audio-only ones exist.
            let audioOnly = variants.filter { !$0.codecs.isEmpty && $0.codecs.allSatisfy(Self.isAudioCodec) }
            if !audioOnly.isEmpty { variants = audioOnly }
            variants.sort { $0.bandwidth < $1.bandwidth }
            let history = configuration.history?.load()
            let start = variants[HLSVariantSelector(bandwidths: variants.map(\.bandwidth), lastThroughput: history, policy: configuration.policy).current]
            // One decoder reads the whole stream: switch only among variants encoded alike.
            candidates = variants.filter { $0.codecs == start.codecs }
            selector = HLSVariantSelector(bandwidths: candidates.map(\.bandwidth), current: candidates.firstIndex(of: start)!, policy: configuration.policy)
            variant = start
            started = .now
            media = try await loadMediaPlaylist(start.url)
        }
        let last = media.segments.last?.sequence ?? media.mediaSequence
        // Live: start three segments from the end (RFC 8216 §6.3.3); VOD and EVENT: at the start.
        let next = media.isEnded || media.isEvent ? media.mediaSequence : max(media.mediaSequence, last - 2)
        status.withLock { status in
            status.candidates = candidates
            status.current = variant
            status.isLive = !media.isEnded
            status.duration = media.isEnded ? media.totalDuration : nil
        }
        return Position(candidates: candidates, selector: selector, variant: variant, playlist: media,
                        playlistLoadedAt: started, nextSequence: next)
    }

    static func isAudioCodec(_ codec: String) -> Bool {
        ["mp4a", "ac-3", "ec-3", "opus", "flac", "alac"].contains { codec.lowercased().hasPrefix($0) }
    }

    // MARK: Segments

    private func downloadSegments(_ position: inout Position) async throws {
        let ahead = Double(configuration.forwardBufferDuration.components.seconds)
            + Double(configuration.forwardBufferDuration.components.attoseconds) / 1e18
        while true {
            try Task.checkCancellation()
            status.withLock { $0.phase = "waiting for space (segment \(position.nextSequence) next)" }
            await buffer.waitForSpace(seconds: ahead)
            try Task.checkCancellation()
            guard let segment = position.playlist.segments.first(where: { $0.sequence >= position.nextSequence }) else {
                if position.playlist.isEnded { return }
                try await reload(&position)
                continue
            }
            if segment.sequence > position.nextSequence, position.appendedMedia {
                onEvent?(.skipped(segments: segment.sequence - position.nextSequence))
            }
            let what = "segment \(segment.sequence) (\(segment.url))"
            if segment.initSection != position.initSection {
                try await enterInitSection(of: segment, what: what, &position)
            }
            status.withLock { $0.phase = "fetching \(what)" }
            let fetched = try await fetch(segment.resource, what: what)
            status.withLock { $0.phase = "appending \(what)" }
            if let problem = HLSSegmentFormat.problem(inMediaSegment: fetched.bytes, isFragmentedMP4: segment.initSection != nil) {
                throw MediaError(.corrupt, input: url, reason: "\(what): \(problem)")
            }
            buffer.append(fetched.bytes, seconds: segment.duration.seconds)
            position.appendedMedia = true
            position.nextSequence = segment.sequence + 1
            try await measure(fetched, &position)
        }
    }

    /// Makes `segment`'s init section the one in effect. Only the first goes into the stream:
    /// libavformat would skip a second `moov`, so a later one must describe the track alike.
    private func enterInitSection(of segment: HLSSegment, what: String, _ position: inout Position) async throws {
        guard let section = segment.initSection, position.initSection != nil || !position.appendedMedia else {
            throw MediaError(.unsupported, input: url, reason: "\(what): changes between MPEG-TS and fMP4 mid-stream, which is not supported")
        }
        let loaded = try await initSection(section, &position)
        if position.initSection == nil {
            buffer.append(loaded.bytes, seconds: 0)
            position.streamSignature = loaded.signature
        } else if loaded.signature == nil || loaded.signature != position.streamSignature {
            throw MediaError(.unsupported, input: url, reason: "\(what): its init section (\(section.url)) describes the audio differently from the first one; a codec change mid-stream is not supported")
        }
        position.initSection = section
    }

    private func initSection(_ section: HLSResource, _ position: inout Position) async throws -> (bytes: [UInt8], signature: [UInt8]?) {
        if let known = position.initSections[section] { return known }
        let fetched = try await fetch(section, what: "init section \(section.url)")
        let loaded = (fetched.bytes, HLSSegmentFormat.signature(ofInitSection: fetched.bytes))
        position.initSections[section] = loaded
        return loaded
    }

    /// Waits until a live playlist may be reloaded, then reloads it.
    private func reload(_ position: inout Position) async throws {
        let target = Duration.seconds(position.playlist.targetDuration)
        try await fetcher.executor.sleep(until: position.playlistLoadedAt + (position.playlistChanged ? target : target / 2))
        let started = ContinuousClock.now
        let playlist = try await loadMediaPlaylist(position.playlist.url)
        position.playlistChanged = playlist != position.playlist
        position.playlist = playlist
        position.playlistLoadedAt = started
    }

    // MARK: Throughput and switching

    private func measure(_ fetched: HLSFetcher.Fetched, _ position: inout Position) async throws {
        guard fetched.bytes.count >= configuration.minimumSampleBytes else { return }
        let sample = Double(fetched.bytes.count) * 8e9 / Double(fetched.nanoseconds)
        let smoothed = position.smoothedThroughput.map { ($0 + sample) / 2 } ?? sample
        position.smoothedThroughput = smoothed
        buffer.setArrivalRate(bytesPerSecond: smoothed / 8)
        status.withLock { $0.throughput = smoothed }
        configuration.history?.save(smoothed)
        guard var selector = position.selector else { return }
        let decision = selector.record(throughput: sample)
        position.selector = selector
        if let target = decision { try await switchVariant(to: target, &position) }
    }

    /// Continues with the variant at `index` from the next media sequence number, if it has
    /// that segment and (fMP4) an init section like the stream's; else drops it as a candidate.
    private func switchVariant(to index: Int, _ position: inout Position) async throws {
        let target = position.candidates[index]
        let problem: String
        do {
            var playlist: HLSMediaPlaylist
            if let known = position.playlists[target.url] { playlist = known } else { playlist = try await loadMediaPlaylist(target.url) }
            if playlist.isEnded { position.playlists[target.url] = playlist }
            if let obstacle = try await obstacle(to: playlist, &position) {
                problem = obstacle
            } else {
                let from = position.variant!
                if position.playlist.isEnded { position.playlists[from.url] = position.playlist }
                position.playlist = playlist
                position.playlistLoadedAt = .now
                position.playlistChanged = true
                position.variant = target
                status.withLock { status in
                    status.current = target
                    status.switches += 1
                }
                onEvent?(.variantChanged(from: from, to: target, atSequence: position.nextSequence))
                return
            }
        } catch let error as MediaError {
            problem = error.reason
        }
        // The variant cannot continue this stream: stay, and do not try it again.
        let current = position.variant!
        position.candidates.remove(at: index)
        position.selector = HLSVariantSelector(bandwidths: position.candidates.map(\.bandwidth),
                                               current: position.candidates.firstIndex(of: current)!, policy: configuration.policy)
        let candidates = position.candidates
        status.withLock { $0.candidates = candidates }
        onEvent?(.variantRejected(target, reason: problem))
    }

    /// Why the segments of `playlist` cannot follow those in the stream, or nil.
    private func obstacle(to playlist: HLSMediaPlaylist, _ position: inout Position) async throws -> String? {
        let next = playlist.segments.first { $0.sequence == position.nextSequence }
        if next == nil, playlist.isEnded || playlist.mediaSequence > position.nextSequence {
            return "it has no segment \(position.nextSequence)"
        }
        let section = next?.initSection ?? playlist.segments.last?.initSection
        if (section == nil) != (position.initSection == nil) { return "it uses another container" }
        guard let section else { return nil }
        let signature = try await initSection(section, &position).signature
        return signature != nil && signature == position.streamSignature ? nil : "its init section describes the audio differently"
    }

    // MARK: Fetching

    private func fetch(_ resource: HLSResource, what: String?) async throws -> HLSFetcher.Fetched {
        do {
            return try await fetcher.fetch(resource) { attempt, delay, reason in
                status.withLock { $0.retries += 1 }
                onEvent?(.retrying(attempt: attempt, delay: delay, reason: what.map { "\($0): \(reason)" } ?? reason))
            }
        } catch let failure as HLSFetcher.Failure {
            throw MediaError(failure.isNotFound ? .notFound : .network, input: url,
                             reason: what.map { "\($0): \(failure.reason)" } ?? failure.reason)
        }
    }

    private func loadPlaylist(_ playlistURL: String) async throws -> HLSPlaylist {
        let what = playlistURL == url ? nil : "playlist \(playlistURL)"
        let fetched = try await fetch(HLSResource(url: playlistURL), what: what)
        do throws(MediaError) {
            return try HLSPlaylist.parse(String(decoding: fetched.bytes, as: UTF8.self), url: playlistURL)
        } catch {
            // Errors name the stream the user asked for; the reason names the playlist.
            throw what == nil ? error : MediaError(error.kind, input: url, reason: "\(playlistURL): \(error.reason)")
        }
    }

    private func loadMediaPlaylist(_ playlistURL: String) async throws -> HLSMediaPlaylist {
        guard case .media(let playlist) = try await loadPlaylist(playlistURL) else {
            throw MediaError(.unsupported, input: url, reason: "\(playlistURL): a master playlist where a media playlist was expected")
        }
        return playlist
    }
}
