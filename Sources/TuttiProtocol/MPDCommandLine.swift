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
        // Bytes, as MPD splits them, not characters: a quote or a backslash followed by a
        // combining mark is one Swift `Character`, and was taken for a letter (`fuzz-mpd`).
        let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t"), quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        let bytes = Array(line.utf8)
        var words: [String] = []
        var index = 0
        while true {
            while index < bytes.count && (bytes[index] == space || bytes[index] == tab) { index += 1 }
            guard index < bytes.count else { break }
            var word: [UInt8] = []
            if bytes[index] == quote {
                index += 1
                var closed = false
                while index < bytes.count {
                    let byte = bytes[index]
                    index += 1
                    if byte == backslash {
                        guard index < bytes.count else { break }
                        word.append(bytes[index])
                        index += 1
                    } else if byte == quote {
                        closed = true
                        break
                    } else {
                        word.append(byte)
                    }
                }
                guard closed else { throw .missingClosingQuote }
                if index < bytes.count && bytes[index] != space && bytes[index] != tab { throw .noSpaceAfterClosingQuote }
            } else {
                while index < bytes.count && bytes[index] != space && bytes[index] != tab {
                    word.append(bytes[index])
                    index += 1
                }
            }
            words.append(String(decoding: word, as: UTF8.self))
        }
        guard let name = words.first else { throw .empty }
        return MPDCommandLine(name: name, arguments: Array(words.dropFirst()))
    }

    /// `"` and `\` escaped, in quotes: how a value is given back as an argument.
    public static func quoted(_ text: String) -> String {
        // By hand: this module is the light speaker's too, which links no Foundation.
        var quoted: [UInt8] = [UInt8(ascii: "\"")]
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") { quoted.append(UInt8(ascii: "\\")) }
            quoted.append(byte)
        }
        quoted.append(UInt8(ascii: "\""))
        return String(decoding: quoted, as: UTF8.self)
    }
}
