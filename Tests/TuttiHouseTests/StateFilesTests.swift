import Foundation
import Testing
import TuttiHouse
import TuttiProtocol
import TuttiSpeaker
import TuttiTestSupport

/// The state files that hold trust (docs/SECURITY.md): a broken one is refused in one line
/// that names it and says what to do, never read as empty (which would forget every admitted
/// speaker, or let a speaker follow any house); and the admission code matched as people type it.
struct StateFilesTests {
    @Test func aBrokenAdmittedSpeakersFileIsRefusedNamingItAndTheRemedy() throws {
        let directory = try TemporaryDirectory("state-files")
        defer { directory.remove() }
        let path = directory.file("admitted-speakers.json")
        try "{\"speakers\": [{\"name\": \"hall\"".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            try House.checkAdmittedSpeakers(path)
        } throws: { error in
            let line = "\(error)"
            return line.contains(path) && line.contains("is not a list of admitted speakers") && line.contains("fix or remove it") && !line.contains("\n")
        }
        try #"{"speakers": [{"name": "hall", "key": "not a key", "admitted": "2026-11-28T00:00:00Z"}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            try House.checkAdmittedSpeakers(path)
        } throws: { error in "\(error)".contains("\"not a key\" is not a speaker's key") }
    }

    @Test func aSpeakersHouseFileIsKeptWholeAndABrokenOneRefused() throws {
        let directory = try TemporaryDirectory("state-files")
        defer { directory.remove() }
        let path = directory.file("speaker/house.json")
        let house = try HouseMembership(path: path)
        let key = IdentityKey.random().publicKey
        #expect(try house.admitted(by: key, name: "tutti"))
        #expect(try HouseMembership(path: path).houseKey == key, "the house read back from \(path)")
        #expect(StateFile.isExposed(path) == false)
        try "[]".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            _ = try HouseMembership(path: path)
        } throws: { error in
            let line = "\(error)"
            return line.contains(path) && line.contains("is not this speaker's house") && line.contains("admit the speaker to its house again")
        }
    }

    @Test(arguments: [("123 456", "123 456", true), ("123456", "123 456", true), ("123-456", "123 456", true), (" 123 456 ", "123 456", true),
                      ("123 457", "123 456", false), ("12345", "012 345", false), ("", "123 456", false)])
    func anAdmissionCodeMatchesAsTyped(typed: String, code: String, matches: Bool) {
        #expect(AdmissionCode.matches(typed, code) == matches)
    }

    @Test func aNameOfSixDigitsReadsAsACodeAndOthersDoNot() {
        #expect(AdmissionCode.looksLikeCode("123 456"))
        #expect(AdmissionCode.looksLikeCode("123456"))
        #expect(!AdmissionCode.looksLikeCode("kitchen"))
        #expect(!AdmissionCode.looksLikeCode("١٢٣٤٥٦"), "Arabic-Indic digits are a name, not a code")
        #expect(!AdmissionCode.looksLikeCode("1234567"))
    }
}
