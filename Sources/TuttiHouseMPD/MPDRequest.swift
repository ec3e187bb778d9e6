/// One line of the MPD protocol, split as MPD splits it: a command name, then arguments
/// separated by spaces, each bare or in double quotes with `\"` and `\\` escapes.
struct MPDRequest: Equatable, Sendable {
    var name: String
    var arguments: [String]

    /// - Throws: `MPDError` with MPD's own words for a line it would refuse to split.
    static func parse(_ line: String) throws(MPDError) -> MPDRequest {
        var words: [String] = []
        var characters = Substring(line)
        while true {
            characters = characters.drop { $0 == " " || $0 == "\t" }
            guard let first = characters.first else { break }
            if first == "\"" {
                characters = characters.dropFirst()
                var word = ""
                var closed = false
                while let character = characters.first {
                    characters = characters.dropFirst()
                    if character == "\\" {
                        guard let escaped = characters.first else { break }
                        word.append(escaped)
                        characters = characters.dropFirst()
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        word.append(character)
                    }
                }
                guard closed else { throw MPDError(.argument, "Missing closing '\"'") }
                if let next = characters.first, next != " " && next != "\t" {
                    throw MPDError(.argument, "Space expected after closing '\"'")
                }
                words.append(word)
            } else {
                let word = characters.prefix { $0 != " " && $0 != "\t" }
                characters = characters.dropFirst(word.count)
                words.append(String(word))
            }
        }
        guard let name = words.first else { throw MPDError(.unknown, "No command given") }
        return MPDRequest(name: name, arguments: Array(words.dropFirst()))
    }

    /// `"` and `\` escaped, in quotes: how a value is given back as an argument.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
