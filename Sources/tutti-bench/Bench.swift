import ArgumentParser

/// `tutti-bench`: performance measurements of Tutti against fixed anchors.
///
/// Each measurement is a subcommand in its own file; shared helpers (processes, timing,
/// generated media, output) live in BenchSupport.swift.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tutti-bench",
        abstract: "Benchmarks for Tutti.",
        discussion: """
            Build and run in release mode, e.g.:
              swift run -c release tutti-bench decode
              swift run -c release tutti-bench decode --format flac --format mp3 --json
              swift build -c release && .build/release/tutti-bench sync --speakers 4 --seconds 180
              .build/release/tutti-bench startup
            Progress goes to stderr, results to stdout.
            """,
        subcommands: [DecodeBenchmark.self, SyncBenchmark.self, StartupBenchmark.self, SimulateBenchmark.self, SweepBenchmark.self,
                      LibraryBenchmark.self, EfficiencyBenchmark.self, ResamplingBenchmark.self, AirPlayBenchmark.self])
}
