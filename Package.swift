// swift-tools-version: 6.1
import PackageDescription

/// The sample loops (resampling, decoding, playout, sync analysis) and the clock estimator are
/// optimized in debug builds too: unoptimized SIMD code is ~50× slower, and the simulated house
/// runs minutes of audio and thousands of clock exchanges through them in `make test`.
let optimizedEvenInDebug: [SwiftSetting] = [.unsafeFlags(["-O"], .when(configuration: .debug))]

/// libFuzzer targets (docs/FUZZING.md): one executable per decoder of untrusted bytes, each only
/// libFuzzer's entry point calling `TuttiFuzzHarness`. Built instrumented by scripts/fuzz.sh
/// (`--sanitize=fuzzer --sanitize=address --product fuzz-…`); in normal builds they are no-op
/// executables, compiled so that API drift breaks the build.
let fuzzTargetNames = ["wire", "clocksync", "control", "streamparser", "chunkdecoder", "hls", "lines", "mpd", "icy", "secure", "snapcast", "jsonrpc", "httpbody", "rtsp", "raop", "airplay2"]
let fuzzTargets: [Target] = [
    // Not TuttiMediaHTTP: the instrumented build would compile AsyncHTTPClient and BoringSSL too.
    .target(name: "TuttiFuzzHarness", dependencies: ["TuttiMedia", "TuttiProtocol",
                                                     .product(name: "NIOCore", package: "swift-nio"),
                                                     .product(name: "NIOEmbedded", package: "swift-nio"),
                                                     .product(name: "Crypto", package: "swift-crypto")],
            path: "Fuzz/Harness"),
] + fuzzTargetNames.map {
    .executableTarget(name: "fuzz-\($0)", dependencies: ["TuttiFuzzHarness"], path: "Fuzz/Targets/fuzz-\($0)")
}

let package = Package(
    name: "Tutti",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tutti", targets: ["tutti"]),
        .executable(name: "tutti-speaker", targets: ["tutti-speaker"]),
        .executable(name: "tutti-bench", targets: ["tutti-bench"]),
        .library(name: "TuttiCore", targets: ["TuttiCore"]),
        .library(name: "TuttiStreamAudio", targets: ["TuttiStreamAudio"]),
        .library(name: "TuttiMedia", targets: ["TuttiMedia"]),
        .library(name: "TuttiMediaHTTP", targets: ["TuttiMediaHTTP"]),
        .library(name: "TuttiDevices", targets: ["TuttiDevices"]),
        .library(name: "TuttiEngine", targets: ["TuttiEngine"]),
        .library(name: "TuttiPlayer", targets: ["TuttiPlayer"]),
        .library(name: "TuttiProtocol", targets: ["TuttiProtocol"]),
        .library(name: "TuttiSpeaker", targets: ["TuttiSpeaker"]),
        .library(name: "TuttiHouse", targets: ["TuttiHouse"]),
        .library(name: "TuttiHouseHTTP", targets: ["TuttiHouseHTTP"]),
        .library(name: "TuttiDiscovery", targets: ["TuttiDiscovery"]),
        .library(name: "TuttiHouseMPD", targets: ["TuttiHouseMPD"]),
        .library(name: "TuttiHouseSnapcast", targets: ["TuttiHouseSnapcast"]),
        .library(name: "TuttiHouseAirPlay", targets: ["TuttiHouseAirPlay"]),
        .library(name: "TuttiSnapcastRooms", targets: ["TuttiSnapcastRooms"]),
        .library(name: "TuttiAirPlayRooms", targets: ["TuttiAirPlayRooms"]),
        .library(name: "TuttiSimulation", targets: ["TuttiSimulation"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // System libraries from Debian packages (see Makefile `deps`).
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswresample-dev"])]),
        .systemLibrary(name: "CSoxr", pkgConfig: "soxr", providers: [.apt(["libsoxr-dev"])]),
        .systemLibrary(name: "CEbur128", pkgConfig: "libebur128", providers: [.apt(["libebur128-dev"])]),
        // GMP's modular arithmetic for SRP-6a (AirPlay 2's pairing).
        .systemLibrary(name: "CGMP", pkgConfig: "gmp", providers: [.apt(["libgmp-dev"])]),
        // The room decodes FLAC with the reference libFLAC: a speaker links no FFmpeg.
        .systemLibrary(name: "CFLAC", pkgConfig: "flac", providers: [.apt(["libflac-dev"])]),
        .systemLibrary(name: "CLibOgg", pkgConfig: "ogg", providers: [.apt(["libogg-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        // No pkgConfig: avahi-client.pc adds -D_REENTRANT, a flag SwiftPM refuses with a warning.
        .systemLibrary(name: "CAvahi", providers: [.apt(["libavahi-client-dev"])]),
        // Names threads (pthread_setname_np, which Swift's Glibc does not import).
        .target(name: "CThreadName"),
        // The kernel's receive time of a datagram (SIOCGSTAMPNS, through variadic ioctl): clock
        // sync stamps arrivals where the packet arrived, not where a busy thread got to it.
        .target(name: "CReceiveTime"),
        // Test-only: counts heap allocations per thread to prove the render loop allocation-free.
        .target(name: "CAllocationCounter"),
        // The resampler's inner product, vectorized for the CPU found at load time (AVX or SSE),
        // with the same bits from every version. Optimized in debug builds too.
        .target(name: "CTuttiDSP", cSettings: [.unsafeFlags(["-O2"], .when(configuration: .debug))]),

        // The data path, in order (docs/ARCHITECTURE.md): time and rings; decoding; network
        // sources; sound cards; the queue engine; the local player; the wire; the room; the house.
        .target(name: "TuttiCore", dependencies: [.product(name: "Atomics", package: "swift-atomics")]),
        // What a room needs of the audio, without FFmpeg: the stream codec's decoder (libFLAC)
        // and the drift resampler. TuttiMedia re-exports it.
        .target(name: "TuttiStreamAudio", dependencies: ["TuttiCore", "CFLAC", "CTuttiDSP"], swiftSettings: optimizedEvenInDebug),
        .target(name: "TuttiMedia", dependencies: ["TuttiCore", "TuttiStreamAudio", "CFFmpeg", "CSoxr", "CEbur128", "CLibOgg", "CTuttiDSP"], swiftSettings: optimizedEvenInDebug),
        .target(name: "TuttiMediaHTTP", dependencies: [
            "TuttiCore", "TuttiMedia",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .target(name: "TuttiDevices", dependencies: ["TuttiCore", "CALSA", "CThreadName",
                                                     .product(name: "Atomics", package: "swift-atomics")]),
        .target(name: "TuttiEngine", dependencies: ["TuttiCore", "TuttiMedia"]),
        .target(name: "TuttiPlayer", dependencies: ["TuttiCore", "TuttiMedia", "TuttiEngine", "TuttiDevices",
                                                    .product(name: "Atomics", package: "swift-atomics")]),
        .target(name: "TuttiProtocol", dependencies: [
            "TuttiCore", "CReceiveTime",
            // The controller token's HMACs (Auth/), and the speakers' keys to come.
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ], swiftSettings: optimizedEvenInDebug),
        .target(name: "TuttiSpeaker", dependencies: [
            "TuttiCore", "TuttiStreamAudio", "TuttiProtocol", "TuttiDevices",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Atomics", package: "swift-atomics"),
        ], swiftSettings: optimizedEvenInDebug),
        // Zero-config discovery through the Avahi daemon: the house announces itself, speakers and
        // `ctl` without --server find it (docs/DISCOVERY.md).
        .target(name: "TuttiDiscovery", dependencies: ["CAvahi"]),
        // No Devices and no ALSA: the house never opens a sound card.
        .target(name: "TuttiHouse", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiEngine", "TuttiProtocol",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // The house's HTTP and WebSocket API (docs/HTTP-API.md): the control commands as REST
        // routes, and a live feed of what changes. Its own module, so the house, the simulated
        // house and the fuzz harness build without Hummingbird.
        .target(name: "TuttiHouseHTTP", dependencies: [
            "TuttiCore", "TuttiProtocol", "TuttiHouse", "TuttiHouseSnapcast",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "NIOCore", package: "swift-nio"),
        ], resources: [.copy("WebUI")]),
        // The house as an MPD server (docs/MPD.md): the same commands for MPD's clients.
        .target(name: "TuttiHouseMPD", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiProtocol", "TuttiHouse",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // The house as Snapcast's control API (docs/SNAPCAST.md), for Snapcast's controllers.
        .target(name: "TuttiHouseSnapcast", dependencies: [
            "TuttiCore", "TuttiProtocol", "TuttiHouse",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // The house as an AirPlay 1 receiver (docs/AIRPLAY.md): senders stream into a group.
        // Its parsers of untrusted bytes (RTSP, SDP, RAOP packets, DMAP) are in TuttiProtocol,
        // where the fuzz harness reaches them.
        .target(name: "TuttiHouseAirPlay", dependencies: [
            "TuttiCore", "TuttiProtocol", "TuttiHouse", "TuttiMedia", "CGMP",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // Snapcast's clients as rooms (docs/SNAPCAST.md): Snapcast's binary stream protocol, each
        // snapclient a speaker of the house whose sound card is the client.
        .target(name: "TuttiSnapcastRooms", dependencies: [
            "TuttiCore", "TuttiDevices", "TuttiProtocol", "TuttiSpeaker",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // AirPlay 1 receivers as rooms (docs/AIRPLAY.md): the sender side of RAOP, each receiver
        // (shairport-sync, an AV receiver) a speaker of the house whose sound card it is.
        .target(name: "TuttiAirPlayRooms", dependencies: [
            "TuttiCore", "TuttiDevices", "TuttiProtocol", "TuttiSpeaker",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // A bad network on purpose (`tutti proxy`, tests, benchmarks): delay, jitter, loss and
        // outages between a speaker and a house, and the home-network models they follow. Its
        // own module so that `tutti` links it without the simulation.
        .target(name: "TuttiImpairment", dependencies: [
            "TuttiCore",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // Test clocks, the HTTP media server, child processes, hostile clients and the simulated
        // house: what tests and benchmarks drive the product with (like NIOEmbedded beside
        // NIOCore). No product module and no shipped executable depends on it.
        .target(name: "TuttiSimulation", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiDevices", "TuttiProtocol", "TuttiSpeaker", "TuttiHouse", "TuttiDiagnostics", "TuttiImpairment",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        // Reads virtual-device captures back and measures sync; for tests and benchmarks.
        .target(name: "TuttiDiagnostics", swiftSettings: optimizedEvenInDebug),
        // What a command line needs beside ArgumentParser (addresses, terminal output, signals,
        // finding the house) and the room's command, shared by `tutti` and `tutti-speaker`.
        .target(name: "TuttiCommandLine", dependencies: [
            "TuttiCore", "TuttiDevices", "TuttiProtocol", "TuttiSpeaker", "TuttiDiscovery",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // The light room (`tutti speaker` becomes it): no FFmpeg, Foundation, Hummingbird or GRDB.
        .executableTarget(name: "tutti-speaker", dependencies: ["TuttiCommandLine"]),
        .executableTarget(name: "tutti", dependencies: [
            "TuttiCommandLine",
            "TuttiCore", "TuttiMedia", "TuttiMediaHTTP", "TuttiDevices", "TuttiEngine", "TuttiPlayer",
            "TuttiProtocol", "TuttiSpeaker", "TuttiHouse", "TuttiHouseHTTP", "TuttiHouseMPD", "TuttiHouseSnapcast", "TuttiHouseAirPlay", "TuttiSnapcastRooms", "TuttiAirPlayRooms", "TuttiDiscovery", "TuttiImpairment",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .executableTarget(name: "tutti-bench", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiMediaHTTP", "TuttiDevices", "TuttiEngine", "TuttiPlayer",
            "TuttiProtocol", "TuttiSpeaker", "TuttiHouse", "TuttiSimulation", "TuttiDiagnostics",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),

        // Tests mirror the modules.
        .testTarget(name: "TuttiCoreTests", dependencies: ["TuttiCore", "TuttiSimulation", "CAllocationCounter"]),
        .testTarget(name: "TuttiMediaTests", dependencies: ["TuttiMedia", "TuttiSimulation", "TuttiDiagnostics", "TuttiTestSupport", "CAllocationCounter", "CTuttiDSP"]),
        .testTarget(name: "TuttiMediaHTTPTests", dependencies: ["TuttiMediaHTTP", "TuttiMedia", "TuttiSimulation", "TuttiTestSupport"]),
        .testTarget(name: "TuttiDevicesTests", dependencies: ["TuttiDevices", "TuttiSimulation", "TuttiTestSupport", "CAllocationCounter"]),
        .testTarget(name: "TuttiEngineTests", dependencies: ["TuttiEngine", "TuttiSimulation", "TuttiTestSupport"]),
        .testTarget(name: "TuttiPlayerTests", dependencies: ["TuttiPlayer", "TuttiEngine", "TuttiDevices", "TuttiSimulation",
                                                             "TuttiTestSupport", "CAllocationCounter"]),
        .testTarget(name: "TuttiProtocolTests", dependencies: ["TuttiProtocol", "TuttiSimulation", "TuttiTestSupport",
                                                               .product(name: "Crypto", package: "swift-crypto"),
                                                               .product(name: "NIOCore", package: "swift-nio"),
                                                               .product(name: "NIOEmbedded", package: "swift-nio")]),
        .testTarget(name: "TuttiSpeakerTests", dependencies: ["TuttiSpeaker", "TuttiProtocol", "TuttiDevices", "TuttiSimulation", "TuttiTestSupport",
                                                              .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "TuttiHouseTests", dependencies: ["TuttiHouse", "TuttiProtocol", "TuttiEngine", "TuttiSimulation",
                                                            "TuttiTestSupport", "TuttiDiagnostics", "TuttiMedia",
                                                            .product(name: "NIOEmbedded", package: "swift-nio"),
                                                            .product(name: "Crypto", package: "swift-crypto"),
                                                            .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "TuttiHouseHTTPTests", dependencies: ["TuttiHouseHTTP", "TuttiHouse", "TuttiProtocol", "TuttiSimulation",
                                                                "TuttiTestSupport", "TuttiDiagnostics",
                                                                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                                                                .product(name: "NIOHTTP1", package: "swift-nio"),
                                                                .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(name: "TuttiSimulationTests", dependencies: ["TuttiSimulation", "TuttiImpairment", "TuttiTestSupport",
                                                                 .product(name: "NIOCore", package: "swift-nio"),
                                                                 .product(name: "NIOHTTP1", package: "swift-nio"),
                                                                .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(name: "TuttiHouseSnapcastTests", dependencies: ["TuttiHouseSnapcast", "TuttiProtocol", "TuttiSimulation", "TuttiTestSupport", "TuttiDiagnostics",
                                                                    .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(name: "TuttiSnapcastRoomsTests", dependencies: ["TuttiSnapcastRooms", "TuttiProtocol", "TuttiSimulation", "TuttiTestSupport", "TuttiDiagnostics",
                                                                    .product(name: "NIOCore", package: "swift-nio"),
                                                                    .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(name: "TuttiAirPlayRoomsTests", dependencies: ["TuttiAirPlayRooms", "TuttiHouseAirPlay", "TuttiMedia", "TuttiProtocol", "TuttiSimulation", "TuttiTestSupport", "TuttiDiagnostics",
                                                                   .product(name: "NIOCore", package: "swift-nio"),
                                                                   .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(name: "TuttiHouseAirPlayTests", dependencies: ["TuttiHouseAirPlay", "TuttiHouse", "TuttiProtocol", "TuttiSimulation", "TuttiTestSupport", "TuttiDiagnostics",
                                                                  .product(name: "NIOEmbedded", package: "swift-nio")]),
        .testTarget(name: "TuttiHouseMPDTests", dependencies: ["TuttiHouseMPD", "TuttiSimulation", "TuttiTestSupport", "TuttiDiagnostics"]),
        .testTarget(name: "TuttiDiscoveryTests", dependencies: ["TuttiDiscovery", "TuttiProtocol", "TuttiSimulation", "TuttiTestSupport"]),
        .testTarget(name: "TuttiCLITests", dependencies: ["TuttiSimulation", "TuttiTestSupport", "TuttiProtocol"]),
        // Replays Fuzz/Corpus and Fuzz/FailCases through the fuzz harness; writes the seeds.
        .testTarget(name: "TuttiFuzzHarnessTests", dependencies: ["TuttiFuzzHarness", "TuttiMedia", "TuttiProtocol", "TuttiTestSupport",
                                                                  .product(name: "NIOCore", package: "swift-nio")]),
        // Shared test helpers: media generation with the ffmpeg CLI, WAV reading, signal checks.
        .target(name: "TuttiTestSupport", dependencies: [
            "TuttiCore", "TuttiDiagnostics", "TuttiMedia", "TuttiMediaHTTP", "TuttiProtocol", "TuttiSimulation",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Tests/TuttiTestSupport"),
    ] + fuzzTargets,
    swiftLanguageModes: [.v6]
)
