/// A song filter as MPD's `find`, `search`, `findadd`, `searchadd` and `count` take it: either
/// `TYPE VALUE` pairs (the old form, which mpc and ncmpcpp send), or an expression (MPD 0.21+,
/// which newer clients send):
///
///     (artist == 'Test Artist')    (title != "x")    (album contains 'Live')
///     (title starts_with 'Intro', MPD 0.24's)  (artist =~ 'Be.*s')  (base 'Some/Directory')
///     (!(artist == 'X'))           ((artist == 'A') AND (album == 'B'))
///
/// `find` compares exactly; `search` compares case-insensitively, and its old form matches
/// substrings. Trailing `sort TAG`, `window START:END` and `position POS` are the command's
/// options (`MPDFilter.Options`).
indirect enum MPDFilter: Sendable {
    case tag(String, Operator, String)
    case base(String)
    case not(MPDFilter)
    case and([MPDFilter])

    enum Operator: Sendable {
        case equal, notEqual, contains, startsWith, matches, notMatches
    }

    /// What a command asks for besides the filter.
    struct Options: Sendable {
        var sort: String?
        var window: Range<Int>?
        var position: String?
    }

    /// The tags a filter may name: what the library knows of a song.
    static let tags: Set<String> = ["artist", "albumartist", "album", "title", "file", "any"]

    /// The song's fields, as the filter compares them (`tag` lowercased).
    struct Song: Sendable {
        var uri: String
        var artist: String?
        var album: String?
        var title: String?

        func values(_ tag: String) -> [String] {
            switch tag {
            case "artist", "albumartist": [artist ?? ""]
            case "album": [album ?? ""]
            case "title": [title ?? ""]
            case "file": [uri]
            // Every tag the song has (MPD's `any` is its tags, not its URI).
            default: [artist, album, title].compactMap { $0 }
            }
        }
    }

    /// Parses a command's arguments. `search` is the old form's meaning: substrings.
    static func parse(_ arguments: [String], search: Bool) throws(MPDError) -> (filter: MPDFilter, options: Options) {
        var parts: [MPDFilter] = []
        var options = Options()
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            let option = word.lowercased()
            if ["sort", "window", "position"].contains(option), index + 1 < arguments.count {
                let value = arguments[index + 1]
                switch option {
                case "sort": options.sort = value
                case "window": options.window = try window(value)
                default: options.position = value
                }
                index += 2
            } else {
                if word.hasPrefix("(") {
                    var parser = ExpressionParser(text: Substring(word))
                    parts.append(try parser.expression())
                    parser.skipSpaces()
                    guard parser.text.isEmpty else { throw MPDError(.argument, "Unparsed garbage after expression") }
                    index += 1
                } else {
                    guard index + 1 < arguments.count else { throw MPDError(.argument, "Incorrect number of filter arguments") }
                    let tag = word.lowercased()
                    if tag == "base" {
                        parts.append(.base(arguments[index + 1]))
                    } else {
                        guard tags.contains(tag) else { throw MPDError(.argument, "Unknown filter type: \(word)") }
                        parts.append(.tag(tag, search ? .contains : .equal, arguments[index + 1]))
                    }
                    index += 2
                }
            }
        }
        guard !parts.isEmpty else { throw MPDError(.argument, "Incorrect number of filter arguments") }
        return (parts.count == 1 ? parts[0] : .and(parts), options)
    }

    static func window(_ text: String) throws(MPDError) -> Range<Int> {
        let bounds = text.split(separator: ":", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Int(bounds[0]), start >= 0 else { throw MPDError(.argument, "Bad window: \(text)") }
        let end = bounds[1].isEmpty ? Int.max : Int(bounds[1]) ?? -1
        guard end >= start else { throw MPDError(.argument, "Bad window: \(text)") }
        return start..<end
    }

    /// Whether `song` passes; `foldCase` for `search`.
    func matches(_ song: Song, foldCase: Bool) -> Bool {
        switch self {
        case .and(let parts): return parts.allSatisfy { $0.matches(song, foldCase: foldCase) }
        case .not(let inner): return !inner.matches(song, foldCase: foldCase)
        case .base(let directory):
            let prefix = directory.hasSuffix("/") ? directory : directory + "/"
            return directory.isEmpty || song.uri.hasPrefix(prefix)
        case .tag(let tag, let comparison, let wanted):
            let values = song.values(tag)
            func fold(_ text: String) -> String { foldCase ? text.lowercased() : text }
            let value = fold(wanted)
            switch comparison {
            case .equal: return values.contains { fold($0) == value }
            case .notEqual: return !values.contains { fold($0) == value }
            case .contains: return values.contains { fold($0).contains(value) }
            case .startsWith: return values.contains { fold($0).hasPrefix(value) }
            case .matches, .notMatches:
                // Checked to compile when parsed.
                guard let pattern = try? Regex(wanted) else { return false }
                let regex = foldCase ? pattern.ignoresCase() : pattern
                let found = values.contains { $0.firstMatch(of: regex) != nil }
                return comparison == .matches ? found : !found
            }
        }
    }

    /// MPD's expression grammar (src/song/Filter.cxx), over one argument.
    private struct ExpressionParser {
        var text: Substring

        mutating func skipSpaces() { text = text.drop { $0 == " " } }

        mutating func expect(_ character: Character) throws(MPDError) {
            skipSpaces()
            guard text.first == character else { throw MPDError(.argument, "'\(character)' expected") }
            text = text.dropFirst()
        }

        mutating func word() -> String {
            skipSpaces()
            let word = text.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
            text = text.dropFirst(word.count)
            return String(word)
        }

        /// A value in single or double quotes, with backslash escapes.
        mutating func quoted() throws(MPDError) -> String {
            skipSpaces()
            guard let quote = text.first, quote == "'" || quote == "\"" else { throw MPDError(.argument, "Quoted string expected") }
            text = text.dropFirst()
            var value = ""
            while let character = text.first {
                text = text.dropFirst()
                if character == "\\", let escaped = text.first {
                    value.append(escaped)
                    text = text.dropFirst()
                } else if character == quote {
                    return value
                } else {
                    value.append(character)
                }
            }
            throw MPDError(.argument, "Closing quote not found")
        }

        mutating func expression() throws(MPDError) -> MPDFilter {
            try expect("(")
            skipSpaces()
            if text.first == "(" {
                var parts = [try expression()]
                while true {
                    skipSpaces()
                    if text.first == ")" { break }
                    guard word() == "AND" else { throw MPDError(.argument, "'AND' expected") }
                    parts.append(try expression())
                }
                try expect(")")
                return parts.count == 1 ? parts[0] : .and(parts)
            }
            if text.first == "!" {
                text = text.dropFirst()
                let inner = try expression()
                try expect(")")
                return .not(inner)
            }
            let name = word()
            let tag = name.lowercased()
            if tag == "base" {
                let directory = try quoted()
                try expect(")")
                return .base(directory)
            }
            guard MPDFilter.tags.contains(tag) else { throw MPDError(.argument, "Unknown filter type: \(name)") }
            skipSpaces()
            let comparison: Operator
            if text.hasPrefix("==") { comparison = .equal; text = text.dropFirst(2) }
            else if text.hasPrefix("!=") { comparison = .notEqual; text = text.dropFirst(2) }
            else if text.hasPrefix("=~") { comparison = .matches; text = text.dropFirst(2) }
            else if text.hasPrefix("!~") { comparison = .notMatches; text = text.dropFirst(2) }
            else {
                switch word() {
                case "contains": comparison = .contains
                case "starts_with": comparison = .startsWith
                case let other: throw MPDError(.argument, "Unknown filter operator: \(other)")
                }
            }
            let value = try quoted()
            if comparison == .matches || comparison == .notMatches {
                do { _ = try Regex(value) } catch { throw MPDError(.argument, "Bad regular expression: \(value)") }
            }
            try expect(")")
            return .tag(tag, comparison, value)
        }
    }
}
