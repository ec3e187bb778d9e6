/// One line of the MPD protocol, split as MPD splits it: a command name, then arguments
/// separated by spaces or tabs, each bare or in double quotes with `\"` and `\\` escapes.
///
/// Here, beside `LineFrameDecoder`, rather than in the MPD front end: it is a parser of bytes
/// from any client on the network, and the fuzz harness (which builds Protocol and Media only)
/// feeds it (`fuzz-mpd`).
public struct MPDCommandLine: Equatable, Sendable {
    public var name: String
    public var arguments: [String]

    public init(name: String, arguments: [String]) {
        self.name = name
        self.arguments = arguments
    }

    /// Why a line cannot be split, in MPD's own words.
    public enum Refusal: Error, Equatable, Sendable {
        case empty
        case missingClosingQuote
        case noSpaceAfterClosingQuote

        public var message: String {
            switch self {
            case .empty: "No command given"
            case .missingClosingQuote: "Missing closing '\"'"
            case .noSpaceAfterClosingQuote: "Space expected after closing '\"'"
            }
        }
    }

    public static func split(_ line: String) throws(Refusal) -> MPDCommandLine {
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
                guard closed else { throw .missingClosingQuote }
                if let next = characters.first, next != " " && next != "\t" { throw .noSpaceAfterClosingQuote }
                words.append(word)
            } else {
                let word = characters.prefix { $0 != " " && $0 != "\t" }
                characters = characters.dropFirst(word.count)
                words.append(String(word))
            }
        }
        guard let name = words.first else { throw .empty }
        return MPDCommandLine(name: name, arguments: Array(words.dropFirst()))
    }

    /// `"` and `\` escaped, in quotes: how a value is given back as an argument.
    public static func quoted(_ text: String) -> String {
        // By hand: this module is the light speaker's too, which links no Foundation.
        var quoted = "\""
        for character in text {
            if character == "\\" || character == "\"" { quoted.append("\\") }
            quoted.append(character)
        }
        quoted.append("\"")
        return quoted
    }
}
