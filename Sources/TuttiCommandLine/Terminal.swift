#if canImport(Glibc)
import Glibc
#endif

/// Writes to stdout/stderr through the file descriptors (the global `stderr` is not
/// concurrency-safe in Swift 6).
public enum Terminal {
    public static func standardError(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
    }

    public static func standardOutput(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { _ = write(1, $0.baseAddress, $0.count) }
    }

    public static var stderrIsTerminal: Bool { isatty(2) != 0 }

    /// "m:ss" or "h:mm:ss".
    public static func clock(_ seconds: Double) -> String {
        let total = max(0, Int(seconds))
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60)
        let ss = s < 10 ? "0\(s)" : "\(s)"
        if h > 0 { return "\(h):\(m < 10 ? "0" : "")\(m):\(ss)" }
        return "\(m):\(ss)"
    }
}
