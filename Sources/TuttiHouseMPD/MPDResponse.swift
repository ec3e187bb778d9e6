/// What a command answers before its `OK`: `key: value` lines, and for `albumart` and
/// `readpicture` a run of raw bytes after them.
struct MPDResponse: Sendable {
    var text = ""
    var binary: [UInt8]?

    mutating func add(_ key: String, _ value: String) {
        // A value never breaks a line: MPD's own replies cannot hold a newline either.
        text += key + ": " + value.replacingOccurrences(of: "\n", with: " ") + "\n"
    }

    mutating func add(_ key: String, _ value: Int) { add(key, String(value)) }
}
