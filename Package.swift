// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Tutti",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tutti", targets: ["tutti"]),
        .executable(name: "tutti-bench", targets: ["tutti-bench"]),
        .library(name: "TuttiCore", targets: ["TuttiCore"]),
        .library(name: "TuttiMedia", targets: ["TuttiMedia"]),
        .library(name: "TuttiDevices", targets: ["TuttiDevices"]),
        .library(name: "TuttiPlayback", targets: ["TuttiPlayback"]),
        .library(name: "TuttiNet", targets: ["TuttiNet"]),
        .library(name: "TuttiServer", targets: ["TuttiServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        // System libraries from Debian packages (see Makefile `deps`).
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswresample-dev"])]),
        .systemLibrary(name: "CSoxr", pkgConfig: "soxr", providers: [.apt(["libsoxr-dev"])]),
        .systemLibrary(name: "CLibOgg", pkgConfig: "ogg", providers: [.apt(["libogg-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        // Test-only: counts heap allocations per thread to prove the render loop allocation-free.
        .target(name: "CAllocationCounter"),

        .target(name: "TuttiCore", dependencies: [.product(name: "Atomics", package: "swift-atomics")]),
        .target(name: "TuttiMedia", dependencies: [
            "TuttiCore", "CFFmpeg", "CSoxr", "CLibOgg",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .target(name: "TuttiDevices", dependencies: ["TuttiCore", "CALSA",
                                                     .product(name: "Atomics", package: "swift-atomics")]),
        .target(name: "TuttiPlayback", dependencies: ["TuttiCore", "TuttiMedia", "TuttiDevices",
                                                      .product(name: "Atomics", package: "swift-atomics")]),
        .target(name: "TuttiNet", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiDevices",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Atomics", package: "swift-atomics"),
        ]),
        .target(name: "TuttiServer", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiNet", "TuttiPlayback",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .executableTarget(name: "tutti", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiDevices", "TuttiPlayback", "TuttiNet", "TuttiServer",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // Reads virtual-device captures back and measures sync; for tests and benchmarks.
        .target(name: "TuttiDiagnostics"),
        .executableTarget(name: "tutti-bench", dependencies: [
            "TuttiCore", "TuttiMedia", "TuttiNet", "TuttiDiagnostics", "TuttiDevices", "TuttiPlayback",
            // Its HTTP media server serves the startup benchmark's URLs.
            "TuttiTestSupport",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),

        .testTarget(name: "TuttiCoreTests", dependencies: ["TuttiCore", "CAllocationCounter"]),
        .testTarget(name: "TuttiMediaTests", dependencies: ["TuttiMedia", "TuttiTestSupport"]),
        .testTarget(name: "TuttiDevicesTests", dependencies: ["TuttiDevices", "TuttiTestSupport", "CAllocationCounter"]),
        .testTarget(name: "TuttiPlaybackTests", dependencies: ["TuttiPlayback", "TuttiTestSupport", "CAllocationCounter"]),
        .testTarget(name: "TuttiNetTests", dependencies: ["TuttiNet", "TuttiTestSupport",
                                                          .product(name: "NIOCore", package: "swift-nio"),
                                                          .product(name: "NIOEmbedded", package: "swift-nio")]),
        .testTarget(name: "TuttiServerTests", dependencies: ["TuttiServer", "TuttiNet", "TuttiTestSupport", "TuttiDiagnostics", "TuttiMedia"]),
        .testTarget(name: "TuttiCLITests", dependencies: ["TuttiTestSupport"]),
        // Shared test helpers: media generation with the ffmpeg CLI, WAV reading, signal checks.
        .target(name: "TuttiTestSupport", dependencies: [
            "TuttiCore", "TuttiDiagnostics", "TuttiMedia",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Tests/TuttiTestSupport"),
    ],
    swiftLanguageModes: [.v6]
)
