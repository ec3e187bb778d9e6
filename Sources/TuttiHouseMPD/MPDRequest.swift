import TuttiProtocol

/// One line of the MPD protocol as the session runs it: its command and arguments
/// (`MPDCommandLine` splits it, as MPD does).
struct MPDRequest: Equatable, Sendable {
    var name: String
    var arguments: [String]

    /// - Throws: `MPDError` with MPD's own words for a line it would refuse to split.
    static func parse(_ line: String) throws(MPDError) -> MPDRequest {
        do throws(MPDCommandLine.Refusal) {
            let split = try MPDCommandLine.split(line)
            return MPDRequest(name: split.name, arguments: split.arguments)
        } catch {
            throw MPDError(error == .empty ? .unknown : .argument, error.message)
        }
    }

    /// `"` and `\` escaped, in quotes: how a value is given back as an argument.
    static func quoted(_ text: String) -> String { MPDCommandLine.quoted(text) }
}
