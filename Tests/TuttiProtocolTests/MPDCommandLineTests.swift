import Testing
import TuttiProtocol

/// MPD request lines split as MPD splits them: on bytes, so that a quote or a backslash before
/// a combining mark (one Swift `Character` with it) still quotes or escapes (found by `fuzz-mpd`).
@Suite struct MPDCommandLineTests {
    @Test func wordsQuotesAndEscapes() throws {
        #expect(try MPDCommandLine.split(#"find "(artist == \"AC/DC\")" sort Album"#)
                == MPDCommandLine(name: "find", arguments: [#"(artist == "AC/DC")"#, "sort", "Album"]))
        #expect(try MPDCommandLine.split("playid\t\t3") == MPDCommandLine(name: "playid", arguments: ["3"]))
        #expect(try MPDCommandLine.split(#"save """#) == MPDCommandLine(name: "save", arguments: [""]))
        #expect(throws: MPDCommandLine.Refusal.missingClosingQuote) { try MPDCommandLine.split(#"add "a.flac"#) }
        #expect(throws: MPDCommandLine.Refusal.noSpaceAfterClosingQuote) { try MPDCommandLine.split(#"add "a"b"#) }
        #expect(throws: MPDCommandLine.Refusal.empty) { try MPDCommandLine.split(" \t ") }
    }

    @Test func aCombiningMarkAfterAQuoteOrABackslashIsAnotherCharacter() throws {
        let accent = "\u{0301}"
        #expect(try MPDCommandLine.split("add \"\(accent)x\"") == MPDCommandLine(name: "add", arguments: ["\(accent)x"]))
        #expect(try MPDCommandLine.split("add \"a\\\(accent)b\"") == MPDCommandLine(name: "add", arguments: ["a\(accent)b"]))
        for word in ["\(accent)d", "\\\(accent)", "\"\(accent)", "Für Elise 🎹"] {
            let quoted = MPDCommandLine.quoted(word)
            #expect(try MPDCommandLine.split("add " + quoted) == MPDCommandLine(name: "add", arguments: [word]), "\(quoted)")
        }
    }
}
