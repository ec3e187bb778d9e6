import ArgumentParser
import Foundation
import TuttiMedia
import TuttiPlayer
import TuttiProtocol
import TuttiSimulation

/// `tutti-bench decode`: how fast Tutti decodes and resamples each supported format, against
/// the ffmpeg CLI doing the same on one thread.
///
/// Tutti: `AudioFileDecoder.read(into:)` to interleaved Float32 stereo, then
/// `Resampler(quality: --quality)` to 48 kHz when the source rate differs — the player's
/// decode path (as in `QueuePlayer`), on the calling thread, timed from opening the file.
/// Anchor: `ffmpeg -threads 1 -i FILE -af aresample=48000:resampler=soxr:precision=20 -f null -`,
/// timed as a whole process: libsoxr at 20-bit precision with its default passband, the recipe
/// Tutti resamples with (`SOXR_HQ`), so both do the same work at equal quality. ffmpeg with its
/// default resampler (libswresample: 32 taps, cutoff 0.97, aliasing above it) is measured beside
/// it for information. All are reported as × real time (audio duration / wall time), best of `--runs`, with the
/// runs of the two interleaved so that load from elsewhere hits both alike.
///
/// ffmpeg's process start-up (dynamic linking of all of libav*, ~60 ms here) is not negligible
/// next to decoding 10 minutes of PCM, so it is measured too (the same command stopped after
/// 10 ms of output) and a ratio without it is shown beside the plain one.
struct DecodeBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode + resample speed per format, against ffmpeg on one thread.",
        discussion: """
            Generates the same program material (mixed sines and pink noise, stereo, 44.1 kHz) in \
            every format with the ffmpeg CLI, once, into the media directory, and reuses it after.

            The anchor is ffmpeg resampling with soxr at 20-bit precision, the recipe Tutti plays \
            with (equal quality). ratio = Tutti ×RT / that ffmpeg's ×RT (wall time); the target \
            is ≥ 1.0 for every format. "ratio w/o start-up" takes ffmpeg's fixed process start-up \
            out of its time; "cpu ratio" uses CPU time instead of wall time.

            "ffmpeg swr ×RT" is ffmpeg with its default resampler (libswresample's 32-tap filter, \
            which aliases above its 0.97 cutoff), shown for information with its ratio.
            """)

    @Option(help: "Length of the generated program material in seconds.")
    var seconds = 600

    @Option(help: "Runs per measurement; the best is reported (this machine's noise is ±20 % a run; the best of 7 settles within a few %).")
    var runs = 7

    @Option(name: .customLong("format"), help: "Formats to measure (repeatable): \(DecodeFormat.all.map(\.name).joined(separator: ", ")). Default: all.")
    var formatNames: [String] = []

    @Option(help: "Resampler quality for Tutti: quick, medium, high (the player default) or very-high.")
    var quality: ResampleQuality = .high

    @Option(name: .customLong("media-dir"), help: "Directory for the generated media (default: $XDG_CACHE_HOME/tutti-bench/decode or ~/.cache/tutti-bench/decode).")
    var mediaDirectory: String?

    @Flag(help: "Generate the media again even if present.")
    var regenerate = false

    @Option(help: "Exit with status 1 if any format's ratio is below this.")
    var requireRatio: Double?

    @Flag(help: "Print the results as JSON.")
    var json = false

    /// For profiling Tutti alone.
    @Flag(name: .customLong("skip-ffmpeg"), help: .hidden)
    var skipFFmpeg = false

    /// Diagnostic: decode only, no resampling on either side (ffmpeg without -af).
    @Flag(name: .customLong("decode-only"), help: .hidden)
    var decodeOnly = false

    static let outputRate = 48000

    mutating func validate() throws {
        guard seconds >= 1 else { throw ValidationError("--seconds must be at least 1") }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        for name in formatNames where DecodeFormat.named(name) == nil {
            throw ValidationError("unknown format '\(name)'; known: \(DecodeFormat.all.map(\.name).joined(separator: ", "))")
        }
    }

    func run() throws {
        let formats = formatNames.isEmpty ? DecodeFormat.all : DecodeFormat.all.filter { formatNames.contains($0.name) }
        let directory = try MediaCache.directory(mediaDirectory, subdirectory: "decode")
        let files = try generate(formats, in: directory)

        var results: [DecodeResult] = []
        for (format, path) in zip(formats, files) {
            Console.progress("measuring \(format.name) (\(runs) runs)…")
            var tuttiBest = (seconds: Double.infinity, cpuSeconds: Double.infinity)
            var ffmpegBest = tuttiBest
            var defaultBest = tuttiBest
            var startupBest = tuttiBest
            var measured: TuttiRun?
            for run in 1...runs {
                let tutti = try Self.measureTutti(path, quality: quality.resamplerQuality, resample: !decodeOnly)
                tuttiBest = (min(tuttiBest.seconds, tutti.seconds), min(tuttiBest.cpuSeconds, tutti.cpuSeconds))
                measured = tutti
                var line = "  run \(run): tutti \(Format.fixed(tutti.seconds, 3)) s (cpu \(Format.fixed(tutti.cpuSeconds, 3)))"
                if !skipFFmpeg {
                    let ffmpeg = try BenchProcess.ffmpeg(ffmpegArguments(path, resampler: .soxr))
                    let startup = try BenchProcess.ffmpeg(ffmpegArguments(path, resampler: .soxr, startupOnly: true))
                    let swr = try BenchProcess.ffmpeg(ffmpegArguments(path, resampler: .swr))
                    ffmpegBest = (min(ffmpegBest.seconds, ffmpeg.seconds), min(ffmpegBest.cpuSeconds, ffmpeg.cpuSeconds))
                    startupBest = (min(startupBest.seconds, startup.seconds), min(startupBest.cpuSeconds, startup.cpuSeconds))
                    defaultBest = (min(defaultBest.seconds, swr.seconds), min(defaultBest.cpuSeconds, swr.cpuSeconds))
                    line += ", ffmpeg soxr \(Format.fixed(ffmpeg.seconds, 3)) s (cpu \(Format.fixed(ffmpeg.cpuSeconds, 3)), start-up \(Format.fixed(startup.seconds, 3)))"
                        + ", ffmpeg swr \(Format.fixed(swr.seconds, 3)) s"
                }
                Console.progress(line)
            }
            let tutti = measured!
            let duration = Double(tutti.sourceFrames) / Double(tutti.sourceRate)
            let expectedOutput = Double(tutti.sourceFrames) * Double(Self.outputRate) / Double(tutti.sourceRate)
            if !decodeOnly, abs(Double(tutti.outputFrames) - expectedOutput) > 2 {
                Console.progress("  warning: \(tutti.outputFrames) output frames, expected \(Int(expectedOutput.rounded()))")
            }
            var result = DecodeResult(
                format: format.name, codec: tutti.codec, sourceRate: tutti.sourceRate,
                resampled: tutti.sourceRate != Self.outputRate, audioSeconds: duration,
                tuttiSeconds: tuttiBest.seconds, tuttiCPUSeconds: tuttiBest.cpuSeconds,
                tuttiRealtime: duration / tuttiBest.seconds)
            if !skipFFmpeg {
                result.ffmpegSeconds = ffmpegBest.seconds
                result.ffmpegCPUSeconds = ffmpegBest.cpuSeconds
                result.ffmpegStartupSeconds = startupBest.seconds
                result.ffmpegRealtime = duration / ffmpegBest.seconds
                result.ratio = ffmpegBest.seconds / tuttiBest.seconds
                result.ratioExcludingStartup = (ffmpegBest.seconds - startupBest.seconds) / tuttiBest.seconds
                result.cpuRatio = ffmpegBest.cpuSeconds / tuttiBest.cpuSeconds
                result.ffmpegDefaultResamplerRealtime = duration / defaultBest.seconds
                result.ratioToDefaultResampler = defaultBest.seconds / tuttiBest.seconds
            }
            results.append(result)
        }

        let report = DecodeReport(
            audioSeconds: Double(seconds), runs: runs, outputRate: Self.outputRate,
            resamplerQuality: decodeOnly ? "none (decode only)" : quality.rawValue,
            ffmpegCommand: (["ffmpeg"] + ffmpegArguments("FILE", resampler: .soxr)).joined(separator: " "),
            ffmpegDefaultResamplerCommand: (["ffmpeg"] + ffmpegArguments("FILE", resampler: .swr)).joined(separator: " "),
            results: results)
        if json {
            Console.output(try Format.json(report))
        } else {
            Console.output(Self.text(report))
        }
        if let requireRatio, results.contains(where: { ($0.ratio ?? 0) < requireRatio }) {
            throw ExitCode(1)
        }
    }

    /// Makes the material once as 16-bit WAV, then encodes every other format from it.
    private func generate(_ formats: [DecodeFormat], in directory: String) throws -> [String] {
        let stem = directory + "/program-\(seconds)s"
        let master = stem + "." + DecodeFormat.wav.fileSuffix
        let madeMaster = try MediaCache.make(master, regenerate: regenerate) { temporary in
            Console.progress("generating \(seconds) s of program material → \(master)")
            let time = try BenchProcess.ffmpeg(Self.programArguments(seconds: seconds) + DecodeFormat.wav.codecArguments + [temporary]).seconds
            Console.progress("  \(Format.fixed(time, 1)) s")
        }
        var paths: [String] = []
        for format in formats {
            let path = stem + "." + format.fileSuffix
            if format.name != DecodeFormat.wav.name {
                try MediaCache.make(path, regenerate: regenerate || madeMaster) { temporary in
                    Console.progress("encoding \(format.name) → \(path)")
                    let time = try BenchProcess.ffmpeg(["-i", master] + format.codecArguments + [temporary]).seconds
                    Console.progress("  \(Format.fixed(time, 1)) s")
                }
            }
            paths.append(path)
        }
        return paths
    }

    /// Music-like stereo material: a few sines per channel with vibrato, tremolo and gated
    /// notes (different per channel), over independent pink noise at about −26 dBFS.
    static func programArguments(seconds: Int) -> [String] {
        let left = [
            "0.16*sin(2*PI*(220*t+0.8*sin(2*PI*0.3*t)))*(0.6+0.4*sin(2*PI*0.5*t))",
            "0.10*sin(2*PI*277.18*t)*(0.5+0.5*sin(2*PI*1.7*t))",
            "0.08*sin(2*PI*(329.63*t+0.5*sin(2*PI*5*t)))",
            "0.05*sin(2*PI*880*t)*gt(sin(2*PI*2*t),0)",
            "0.03*sin(2*PI*1760.7*t)",
        ].joined(separator: "+")
        let right = [
            "0.16*sin(2*PI*(220.4*t+0.8*sin(2*PI*0.31*t)))*(0.6+0.4*sin(2*PI*0.45*t))",
            "0.10*sin(2*PI*329.63*t)*(0.5+0.5*sin(2*PI*1.3*t))",
            "0.08*sin(2*PI*(415.3*t+0.5*sin(2*PI*4.5*t)))",
            "0.05*sin(2*PI*1318.5*t)*gt(sin(2*PI*2*t+1),0)",
            "0.03*sin(2*PI*2637*t)",
        ].joined(separator: "+")
        return [
            "-f", "lavfi", "-i", "aevalsrc=exprs='\(left)|\(right)':s=44100:c=stereo:d=\(seconds)",
            "-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.05:seed=1:r=44100:d=\(seconds)",
            "-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.05:seed=2:r=44100:d=\(seconds)",
            "-filter_complex", "[1][2]join=inputs=2:channel_layout=stereo[noise];[0][noise]amix=inputs=2:normalize=0[a]",
            "-map", "[a]",
        ]
    }

    struct TuttiRun {
        var seconds: Double
        var cpuSeconds: Double
        var codec: String
        var sourceRate: Int
        var sourceFrames: Int
        var outputFrames: Int
    }

    /// Opens, decodes and resamples the whole file on this thread, as the player's decode path does.
    static func measureTutti(_ path: String, quality: Resampler.Quality, resample: Bool = true) throws -> TuttiRun {
        let start = Stopwatch.now()
        let startCPU = Stopwatch.processCPUTime()
        let decoder = try AudioFileDecoder(path: path, outputChannelCount: 2)
        let resampler = decoder.sampleRate == outputRate || !resample ? nil
            : try Resampler(inputRate: decoder.sampleRate, outputRate: outputRate, channelCount: 2, quality: quality)
        var decoded: [Float] = []
        var resampled: [Float] = []
        var sourceFrames = 0
        var outputFrames = 0
        while true {
            let frames = try decoder.read(into: &decoded)
            if frames == 0 { break }
            sourceFrames += frames
            if let resampler {
                resampled.removeAll(keepingCapacity: true)
                decoded.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: frames, appendingTo: &resampled) }
                outputFrames += resampled.count / 2
            } else {
                outputFrames += frames
            }
        }
        if let resampler {
            resampled.removeAll(keepingCapacity: true)
            resampler.flush(appendingTo: &resampled)
            outputFrames += resampled.count / 2
        }
        let seconds = Double(Stopwatch.now() - start) / 1e9
        let cpuSeconds = Double(Stopwatch.processCPUTime() - startCPU) / 1e9
        if let error = decoder.readError { throw BenchError("\(path): read error: \(error)") }
        if decoder.corruptPacketCount > 0 { Console.progress("  warning: \(decoder.corruptPacketCount) corrupt packets in \(path)") }
        return TuttiRun(seconds: seconds, cpuSeconds: cpuSeconds, codec: decoder.info.codec, sourceRate: decoder.sampleRate,
                        sourceFrames: sourceFrames, outputFrames: outputFrames)
    }

    /// `-threads 1 -i FILE -af aresample=48000[:resampler=soxr:precision=20] -f null -` (BenchProcess adds -nostdin -hide_banner
    /// -nostats -loglevel error, which change nothing in the work). `startupOnly`: stopped after
    /// 10 ms of output, which measures ffmpeg's fixed cost: process start, dynamic linking,
    /// opening the file, codec and filter set-up.
    func ffmpegArguments(_ path: String, resampler: AnchorResampler, startupOnly: Bool = false) -> [String] {
        var arguments = ["-threads", "1", "-i", path]
        if !decodeOnly {
            arguments += ["-af", "aresample=\(Self.outputRate)" + (resampler == .soxr ? ":resampler=soxr:precision=20" : "")]
        }
        if startupOnly { arguments += ["-t", "0.01"] }
        return arguments + ["-f", "null", "-"]
    }

    static func text(_ report: DecodeReport) -> String {
        let minutes = Format.fixed(report.audioSeconds / 60, report.audioSeconds.truncatingRemainder(dividingBy: 60) == 0 ? 0 : 1)
        var text = """
            Decode + resample to \(report.outputRate / 1000) kHz Float32 stereo, one thread, best of \(report.runs); \(minutes) min of 44.1 kHz stereo material.
            tutti:  AudioFileDecoder + Resampler (soxr, quality \(report.resamplerQuality)) when the source rate differs (opus decodes at 48 kHz)
            ffmpeg: \(report.ffmpegCommand) (equal quality: the ratio)
            ffmpeg swr: \(report.ffmpegDefaultResamplerCommand) (its default resampler, for information)
            """
        text += "\n\n" + Format.table(
            header: ["format", "tutti ×RT", "ffmpeg ×RT", "ratio", "ffmpeg start-up", "ratio w/o start-up", "cpu ratio", "ffmpeg swr ×RT", "ratio to swr"],
            rows: report.results.map { r in
                func cell(_ value: Double?, _ decimals: Int, _ unit: String = "") -> String {
                    value.map { Format.fixed($0, decimals) + unit } ?? "–"
                }
                return [r.format, cell(r.tuttiRealtime, 1), cell(r.ffmpegRealtime, 1), cell(r.ratio, 2),
                        cell(r.ffmpegStartupSeconds.map { $0 * 1000 }, 0, " ms"), cell(r.ratioExcludingStartup, 2), cell(r.cpuRatio, 2),
                        cell(r.ffmpegDefaultResamplerRealtime, 1), cell(r.ratioToDefaultResampler, 2)]
            })
        return text
    }
}

struct DecodeResult: Codable {
    var format: String
    var codec: String
    var sourceRate: Int
    var resampled: Bool
    var audioSeconds: Double
    /// Best wall time of Tutti's open + decode + resample.
    var tuttiSeconds: Double
    var tuttiCPUSeconds: Double
    var tuttiRealtime: Double
    /// Best wall time of the whole ffmpeg process.
    var ffmpegSeconds: Double?
    var ffmpegCPUSeconds: Double?
    /// Best wall time of the same ffmpeg command stopped after 10 ms of output.
    var ffmpegStartupSeconds: Double?
    var ffmpegRealtime: Double?
    /// tuttiRealtime / ffmpegRealtime, wall time: the benchmark's figure.
    var ratio: Double?
    /// As `ratio`, with ffmpeg's fixed start-up cost taken out of its time.
    var ratioExcludingStartup: Double?
    /// As `ratio`, from CPU time instead of wall time (less sensitive to other load on the machine).
    var cpuRatio: Double?
    /// ffmpeg with its default resampler (libswresample), for information.
    var ffmpegDefaultResamplerRealtime: Double?
    var ratioToDefaultResampler: Double?
}

struct DecodeReport: Codable {
    var audioSeconds: Double
    var runs: Int
    var outputRate: Int
    var resamplerQuality: String
    var ffmpegCommand: String
    var ffmpegDefaultResamplerCommand: String
    var results: [DecodeResult]
}

/// One benchmark format: how ffmpeg encodes it from the 16-bit WAV master.
struct DecodeFormat: Sendable {
    var name: String
    /// File name suffix after the material's stem; the extension picks ffmpeg's muxer.
    var fileSuffix: String
    var codecArguments: [String]

    static let wav = DecodeFormat(name: "wav", fileSuffix: "wav", codecArguments: ["-c:a", "pcm_s16le"])
    static let all: [DecodeFormat] = [
        wav,
        DecodeFormat(name: "flac", fileSuffix: "flac", codecArguments: ["-c:a", "flac"]),
        DecodeFormat(name: "mp3", fileSuffix: "mp3", codecArguments: ["-c:a", "libmp3lame", "-b:a", "192k"]),
        DecodeFormat(name: "aac", fileSuffix: "aac.m4a", codecArguments: ["-c:a", "aac", "-b:a", "192k"]),
        DecodeFormat(name: "alac", fileSuffix: "alac.m4a", codecArguments: ["-c:a", "alac"]),
        DecodeFormat(name: "opus", fileSuffix: "opus", codecArguments: ["-c:a", "libopus", "-b:a", "128k"]),
        DecodeFormat(name: "vorbis", fileSuffix: "ogg", codecArguments: ["-c:a", "libvorbis", "-q:a", "5"]),
    ]

    static func named(_ name: String) -> DecodeFormat? { all.first { $0.name == name } }
}

enum AnchorResampler: String, CaseIterable, ExpressibleByArgument {
    case swr, soxr
}

enum ResampleQuality: String, CaseIterable, ExpressibleByArgument {
    case quick, low, medium, high
    case veryHigh = "very-high"

    var resamplerQuality: Resampler.Quality {
        switch self {
        case .quick: .quick
        case .low: .low
        case .medium: .medium
        case .high: .high
        case .veryHigh: .veryHigh
        }
    }
}
