import TuttiCommandLine
import ArgumentParser
import Foundation
import Synchronization
import TuttiCore
import TuttiDevices
import TuttiMedia
import TuttiEngine
import TuttiPlayer
import TuttiMediaHTTP
import TuttiProtocol
import TuttiSpeaker
import TuttiHouse

struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play files and URLs as one gapless queue.",
        discussion: """
            Every item is decoded with FFmpeg, trimmed of encoder delay and padding, and converted to \
            the output rate and format, so consecutive tracks of one recording play as one signal.
            A file that cannot be played is reported on one line and skipped; the exit status is 1 \
            if any item failed.

            URLs (http://, https://) stream as they download, with range requests for --start; \
            playback waits until it is likely to keep up and, after a network stall, resumes by \
            itself with nothing lost. Failed transfers are retried with backoff (0.25 s to 4 s). \
            Internet radio (ICY) titles are reported as events.

            Outputs (--output):
              alsa:<pcm>       ALSA playback, e.g. alsa:default or alsa:hw:0
              wav:<path>       render to a WAV file as fast as possible
              virtual:<path>   simulated sound card, paced in real time; writes <path> and <path>.timing.jsonl
              null             paced like virtual, writes nothing
            Without --output: ALSA "default" if the machine has a sound card, else virtual:tutti-virtual.wav.
            """)

    @Argument(help: "What to play, in order: files, http(s) URLs, - for standard input, or pipe:PATH for a named pipe (raw PCM: pipe:PATH?sampleformat=48000:16:2).")
    var files: [String]

    @Option(name: .shortAndLong, help: "Where to play: alsa:<pcm>, wav:<path>, virtual:<path> or null.")
    var output: String?

    @Option(help: "Output sample rate in Hz.")
    var rate: Int = 48000

    @Option(help: "Output sample format: f32, s16 or s24.")
    var format: SampleFormat = .float32

    @Option(help: "Output channels.")
    var channels: Int = 2

    @Option(help: "Start this many seconds into the first file.")
    var start: Double = 0

    @Option(help: "Play the queue N times, or 'forever', joined seamlessly (sample-exact at the seams).")
    var loop: LoopCount = .times(1)

    @Option(name: .customLong("device-drift-ppm"), parsing: .unconditional, help: "Crystal error of a virtual/null device, in ppm.")
    var deviceDriftPPM: Double = 0

    @Flag(name: .long, help: "Do not show the progress line.")
    var quiet = false

    @Option(help: "Write events to stdout for scripts: 'jsonl' gives one JSON object per line (status, buffering, item, stall, retry, title, error, end), each with mono_ns, the CLOCK_MONOTONIC time it is heard.")
    var events: EventFormat?

    func validate() throws {
        guard (8000...384_000).contains(rate) else { throw ValidationError("--rate \(rate): must be between 8000 and 384000 Hz") }
        guard (1...8).contains(channels) else { throw ValidationError("--channels \(channels): must be between 1 and 8") }
        guard start >= 0 && start.isFinite else { throw ValidationError("--start \(start): must be a non-negative number of seconds") }
    }

    func run() throws {
        let spec: DeviceSpec
        if let output {
            do { spec = try DeviceSpec(parsing: output) } catch { throw ValidationError("--output \(error)") }
        } else {
            let chosen = DeviceSpec.machineDefault()
            spec = chosen.spec
            if let notice = chosen.notice { Terminal.standardError("tutti: \(notice)\n") }
        }
        var options = DeviceSpec.Options(clock: MonotonicClock())
        options.driftPPM = deviceDriftPPM
        let requested = AudioFormat(sampleRate: rate, channelCount: channels, sampleFormat: format)
        let device: any OutputDevice
        do { device = try spec.makeDevice(format: requested, options: options) } catch {
            Terminal.standardError("tutti: \(error)\n")
            throw ExitCode(2)
        }
        // The process's one HTTP client, for URLs in the queue.
        let client = MediaHTTPClient.make()
        defer { try? client.syncShutdown() }
        var configuration = QueuePlayer.Configuration()
        configuration.network = HTTPInputOpener(client: client, clock: MonotonicClock())
        configuration.startTime = MediaTime(seconds: start)
        if case .times(let n) = loop { configuration.passes = n } else { configuration.passes = nil }
        let player = QueuePlayer(items: files.map(PlayerItem.init(path:)),
                                 outputFormat: .pipeline(sampleRate: device.format.sampleRate, channelCount: device.format.channelCount),
                                 configuration: configuration)
        let showProgress = !quiet && events == nil && Terminal.stderrIsTerminal
        if events == .jsonl { player.onEvent = { Terminal.standardOutput(EventLine.json($0) + "\n") } }
        let progress = ProgressLine(enabled: showProgress, sampleRate: device.format.sampleRate)
        player.onItemEvent = { outcome in
            if let error = outcome.error, outcome.frameCount > 0 || outcome.info == nil {
                progress.clear()
                Terminal.standardError("tutti: \(error)\n")
            }
        }

        TerminationSignals.onFirst { _ in player.stop() }

        do { try player.play(on: device) } catch {
            Terminal.standardError("tutti: \(error)\n")
            throw ExitCode(2)
        }
        while !player.isFinished {
            progress.update(player: player)
            Thread.sleep(forTimeInterval: 0.1)  // display refresh only
        }
        let outcomes: [ItemOutcome]
        do { outcomes = try player.waitUntilFinished() } catch {
            progress.clear()
            Terminal.standardError("tutti: \(error)\n")
            throw ExitCode(2)
        }
        progress.clear()
        if device.underrunCount > 0 {
            Terminal.standardError("tutti: \(device.name): \(device.underrunCount) underrun(s)\n")
        }
        if TerminationSignals.received != nil { throw ExitCode(130) }
        if outcomes.contains(where: { $0.error != nil }) { throw ExitCode(1) }
    }
}

extension SampleFormat: ExpressibleByArgument {}

enum EventFormat: String, ExpressibleByArgument {
    case jsonl
}

/// One `--events jsonl` line.
enum EventLine {
    static func json(_ event: PlayerEvent) -> String {
        var object: [String: Any]
        switch event {
        case .status(let status, let reason, let time):
            object = ["event": "status", "status": status.rawValue, "mono_ns": time]
            if let reason { object["reason"] = reason.rawValue }
        case .itemStarted(let item, let time):
            object = ["event": "item", "index": item.index, "pass": item.pass, "path": item.path, "mono_ns": time]
            if let info = item.info {
                object["title"] = info.displayTitle
                if let d = info.duration { object["duration"] = d.seconds }
            }
        case .itemEnded(let item, let time):
            object = ["event": "item_end", "index": item.index, "pass": item.pass, "path": item.path,
                      "frames": item.frameCount,
                      "mono_ns": time]
        case .itemFailed(let item, let time):
            object = ["event": "error", "index": item.index, "path": item.path, "reason": item.error?.reason ?? "failed",
                      "message": item.error?.description ?? item.path, "mono_ns": time]
        case .buffering(let state, let time):
            object = ["event": "buffering", "likely_to_keep_up": state.isPlaybackLikelyToKeepUp, "full": state.isPlaybackBufferFull,
                      "empty": state.isPlaybackBufferEmpty, "ahead_s": (state.bufferedAheadSeconds * 1000).rounded() / 1000, "mono_ns": time]
            if let rate = state.arrivalRate { object["arrival_rate"] = (rate * 1000).rounded() / 1000 }
        case .stalled(let stalls, let time):
            object = ["event": "stall", "stalls": stalls, "mono_ns": time]
        case .retrying(let index, let attempt, let delay, let reason, let time):
            object = ["event": "retry", "index": index, "attempt": attempt, "delay_s": Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18,
                      "reason": reason, "mono_ns": time]
        case .title(let index, let title, let time):
            object = ["event": "title", "index": index, "title": title, "mono_ns": time]
        case .ended(let time):
            object = ["event": "end", "mono_ns": time]
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// `--loop 3` or `--loop forever`.
enum LoopCount: ExpressibleByArgument, Equatable {
    case times(Int)
    case forever

    init?(argument: String) {
        if argument == "forever" { self = .forever; return }
        guard let n = Int(argument), n >= 1 else { return nil }
        self = .times(n)
    }

    static var defaultValueDescription: String { "1" }
}

/// The one-line "position / duration  title" display on a terminal.
final class ProgressLine: @unchecked Sendable {
    private let enabled: Bool
    private let sampleRate: Int
    private let lock = NSLock()
    private var shown = false

    init(enabled: Bool, sampleRate: Int) {
        self.enabled = enabled
        self.sampleRate = sampleRate
    }

    func update(player: QueuePlayer) {
        guard enabled else { return }
        let playhead = player.playheadFrame
        guard let current = player.startedItems.last(where: { $0.startFrame <= playhead && $0.info != nil }), let info = current.info else { return }
        let position = Double(playhead - current.startFrame) / Double(sampleRate)
        let duration = info.duration.map { Terminal.clock($0.seconds) } ?? "?"
        let line = "\(Terminal.clock(position)) / \(duration)  [\(current.index + 1)/\(player.items.count)] \(info.displayTitle)"
        lock.withLock {
            Terminal.standardError("\r\u{1B}[K" + String(line.prefix(120)))
            shown = true
        }
    }

    func clear() {
        lock.withLock {
            if shown { Terminal.standardError("\r\u{1B}[K") }
            shown = false
        }
    }
}
