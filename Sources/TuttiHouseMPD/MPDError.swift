/// A refusal in MPD's terms: `ACK [code@index] {command} message`, after which the
/// connection goes on.
struct MPDError: Error, Equatable, Sendable {
    /// MPD's error codes (src/protocol/Ack.hxx).
    enum Code: Int, Sendable {
        case notList = 1, argument = 2, password = 3, permission = 4, unknown = 5
        case noExist = 50, playlistMax = 51, system = 52, playlistLoad = 53, updateAlready = 54, playerSync = 55, exist = 56
    }

    var code: Code
    var message: String
    /// Whether the ACK names its command: MPD names no command it does not know.
    var namesCommand = true

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// MPD's refusal of a command it does not know, which names no command.
    static func unknownCommand(_ name: String) -> MPDError {
        var error = MPDError(.unknown, "unknown command \"\(name)\"")
        error.namesCommand = false
        return error
    }

    /// The ACK line for `command`, the `index`-th of its command list (0 outside one).
    func line(command: String, index: Int) -> String {
        // One line: a message never breaks the protocol's framing.
        let oneLine = message.replacingOccurrences(of: "\n", with: " ")
        return "ACK [\(code.rawValue)@\(index)] {\(command)} \(oneLine)\n"
    }
}
