import ArgumentParser
import TuttiCommandLine
#if canImport(Glibc)
import Glibc
#endif

/// `tutti speaker`: becomes `tutti-speaker`, the light executable beside this one, with the
/// same arguments and the same process id, so that a room costs what a room needs (no FFmpeg,
/// Hummingbird or GRDB mapped into it: docs/EFFICIENCY.md). Without it (only `tutti` built),
/// the room runs here.
struct Speaker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "speaker", abstract: SpeakerCommand.configuration.abstract, discussion: SpeakerCommand.configuration.discussion)

    @OptionGroup var room: SpeakerCommand

    func run() async throws {
        if let light = Self.lightExecutable() {
            // Everything after the subcommand's name, as given.
            let arguments = CommandLine.arguments
            let rest = arguments.firstIndex(of: "speaker").map { Array(arguments[($0 + 1)...]) } ?? []
            Self.replaceProcess(with: light, arguments: [light] + rest)
        }
        try await room.run()
    }

    /// `tutti-speaker` in this executable's directory, if it is there and executable.
    static func lightExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let candidate = String(path[...slash]) + "tutti-speaker"
        return access(candidate, X_OK) == 0 ? candidate : nil
    }

    /// Replaces this process with `path`; returns only if that failed.
    static func replaceProcess(with path: String, arguments: [String]) {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        execv(path, &argv)
        for pointer in argv { free(pointer) }
    }
}
