import TuttiCommandLine
import ArgumentParser
import Foundation
import TuttiCore
import TuttiMedia
import TuttiMediaHTTP

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show format, duration and tags of audio files.",
        discussion: "With --json, prints one JSON array with an object per file; unreadable files get an \"error\" field.")

    @Argument(help: "Audio files to describe.")
    var files: [String]

    @Flag(help: "Print JSON for scripts.")
    var json = false

    func run() throws {
        var failed = false
        var objects: [[String: Any]] = []
        let client = MediaHTTPClient.make()
        defer { try? client.syncShutdown() }
        let network = HTTPInputOpener(client: client, clock: MonotonicClock())
        for path in files {
            do {
                let info = try AudioFileDecoder(path: path, network: network).info
                if json { objects.append(Self.object(info)) } else { Terminal.standardOutput(Self.text(info)) }
            } catch {
                failed = true
                if json { objects.append(["path": path, "error": error.reason]) } else { Terminal.standardError("tutti: \(error)\n") }
            }
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            Terminal.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
        }
        if failed { throw ExitCode(1) }
    }

    static func object(_ info: TrackInfo) -> [String: Any] {
        var object: [String: Any] = [
            "path": info.input, "container": info.container, "codec": info.codec,
            "sampleRate": info.sampleRate, "channels": info.channelCount, "hasArtwork": info.hasArtwork,
            "durationIsEstimate": info.durationIsEstimate,
        ]
        if let d = info.duration { object["duration"] = d.seconds; object["durationTime"] = ["value": d.value, "timescale": Int(d.timescale)] }
        if let bits = info.bitsPerSample { object["bitsPerSample"] = bits }
        if let bitRate = info.bitRate { object["bitRate"] = bitRate }
        if let title = info.title { object["title"] = title }
        if let artist = info.artist { object["artist"] = artist }
        if let album = info.album { object["album"] = album }
        return object
    }

    static func text(_ info: TrackInfo) -> String {
        var lines = ["\(info.input)"]
        let channels = info.channelCount == 1 ? "mono" : info.channelCount == 2 ? "stereo" : "\(info.channelCount) channels"
        var format = "  format:   \(info.codec), \(info.sampleRate) Hz, \(channels)"
        if let bits = info.bitsPerSample { format += ", \(bits)-bit" }
        if let bitRate = info.bitRate { format += ", \(bitRate / 1000) kbit/s" }
        lines.append(format)
        if let d = info.duration {
            lines.append("  duration: \(Terminal.clock(d.seconds)) (\(String(format: "%.3f", d.seconds)) s\(info.durationIsEstimate ? ", estimated" : ""))")
        }
        if let title = info.title { lines.append("  title:    \(title)") }
        if let artist = info.artist { lines.append("  artist:   \(artist)") }
        if let album = info.album { lines.append("  album:    \(album)") }
        lines.append("  artwork:  \(info.hasArtwork ? "yes" : "no")")
        return lines.joined(separator: "\n") + "\n"
    }
}
