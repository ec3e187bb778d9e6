import Foundation

/// The ALSA virtual sound card (Devices/alsa-virtual, built by `make alsa-virtual`) as tests and
/// benchmarks use it: a configuration naming cards, and the environment that makes ALSA programs read it.
public enum ALSAVirtualCard {
    /// The plugin `make alsa-virtual` builds.
    public static var library: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/alsa/libasound_module_pcm_tutti_virtual.so").path
    }

    /// One card: its PCM name, the WAV it captures to, its crystal error, period and buffer.
    public struct Card: Sendable {
        public var name: String, path: String, ppm: Double, period: Int, buffer: Int
        public init(name: String, path: String, ppm: Double, period: Int = 480, buffer: Int = 1920) {
            (self.name, self.path, self.ppm, self.period, self.buffer) = (name, path, ppm, period, buffer)
        }
    }

    /// Writes `asoundrc` in `directory` defining `cards`; returns the `ALSA_CONFIG_PATH=…`
    /// assignment to run ALSA programs with (through `/usr/bin/env`).
    public static func configure(_ cards: [Card], inDirectory directory: String) throws -> String {
        guard FileManager.default.fileExists(atPath: library) else {
            throw ChildProcessError(description: "\(library) is missing: build it with `make alsa-virtual` (make test does)")
        }
        let config = URL(fileURLWithPath: directory).appendingPathComponent("asoundrc").path
        let lines = ["pcm_type.tutti_virtual { lib \"\(library)\" }"]
            + cards.map { "pcm.\($0.name) { type tutti_virtual  path \"\($0.path)\"  ppm \($0.ppm)  period \($0.period)  buffer \($0.buffer) }" }
        try lines.joined(separator: "\n").appending("\n").write(toFile: config, atomically: true, encoding: .utf8)
        return "ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:" + config
    }
}
