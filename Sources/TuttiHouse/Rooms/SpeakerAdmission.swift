import Foundation
import NIOCore
import TuttiProtocol

/// Which speakers the house lets in: those admitted once (`tutti ctl admit`, the web UI's
/// Admit), by their identity key, kept like ssh's authorized keys in
/// `<state-dir>/admitted-speakers.json`; and the ones knocking now, which wait.
///
/// A waiting speaker holds its connection and receives nothing (no stream, no settings), and
/// what it sends changes nothing; it is listed with the code it also logs (`AdmissionCode`),
/// so that whoever admits it sees it is the speaker in front of them. At most
/// `maximumWaiting` wait: one more makes the one that waited longest give way, so strangers
/// knocking cannot hold more than that many of the house's connections.
///
/// Belongs to the house's event loop (a part of `HouseCore`).
struct SpeakerAdmission {
    /// One admitted speaker, as its file keeps it.
    struct Admitted: Codable, Equatable, Sendable {
        /// The speaker's name when it was admitted (a room's name may change since).
        var name: String
        /// Its identity key's text (`PeerKey.text`).
        var key: String
        /// When, by the wall clock (ISO 8601).
        var admitted: String
    }

    private struct File: Codable {
        var speakers: [Admitted]
    }

    /// A speaker knocking now.
    struct Waiting {
        var name: String
        var key: PeerKey
        var code: String
        var address: String
        var since: Int64
        var channel: any Channel
        /// Lets it in: called once, on the loop, when it is admitted.
        var letIn: () -> Void
    }

    static let fileName = "admitted-speakers.json"
    static let maximumWaiting = 16

    private(set) var admitted: [Admitted]
    private(set) var waiting: [Waiting] = []
    /// Where the admitted are kept; nil for a house with no state directory's file (a test's).
    let path: String?

    /// Reads the admitted speakers from `path` (none when there is no file yet), plus `initial`.
    init(path: String?, initial: [PeerKey] = []) throws(StateFile.Failure) {
        var admitted: [Admitted] = []
        if let path, StateFile.exists(path) { admitted = try Self.read(path) }
        self.init(path: path, admitted: admitted, initial: initial)
    }

    /// Admitted speakers kept in memory only: `initial`.
    static func inMemory(initial: [PeerKey]) -> SpeakerAdmission { SpeakerAdmission(path: nil, admitted: [], initial: initial) }

    private init(path: String?, admitted: [Admitted], initial: [PeerKey]) {
        self.path = path
        self.admitted = admitted
        for key in initial where !isAdmitted(key) {
            self.admitted.append(Admitted(name: "", key: key.text, admitted: Self.now()))
        }
    }

    /// The admitted speakers of the file at `path`: what `tutti server` checks before it starts.
    static func read(_ path: String) throws(StateFile.Failure) -> [Admitted] {
        let file = try StateFile.readJSON(File.self, from: path, what: "a list of admitted speakers",
                                          remedy: "fix or remove it (its speakers then wait to be admitted again)")
        for speaker in file.speakers where PeerKey(text: speaker.key) == nil {
            throw StateFile.Failure(description: "\(path): \(speaker.key.debugDescription) is not a speaker's key; fix or remove it")
        }
        return file.speakers
    }

    func isAdmitted(_ key: PeerKey) -> Bool { admitted.contains { $0.key == key.text } }

    /// Adds a knocking speaker; returns its own earlier entries (the same key), which it
    /// replaces, and one that must give way for it, if any: both to be closed.
    mutating func knock(_ speaker: Waiting) -> (replaced: [Waiting], evicted: Waiting?) {
        let replaced = waiting.filter { $0.key == speaker.key }
        waiting.removeAll { $0.key == speaker.key }
        waiting.append(speaker)
        guard waiting.count > Self.maximumWaiting else { return (replaced, nil) }
        return (replaced, waiting.removeFirst())
    }

    /// Forgets a knocking speaker whose connection ended.
    mutating func leave(channel: any Channel) {
        waiting.removeAll { $0.channel === channel }
    }

    /// The waiting speakers that `reference` names: by name, else by code (with or without its
    /// space); and with `code`, only the one that shows it.
    func waiting(named reference: String, code: String? = nil) -> [Waiting] {
        var matches = waiting.filter { $0.name == reference }
        if matches.isEmpty, AdmissionCode.looksLikeCode(reference) {
            matches = waiting.filter { AdmissionCode.matches(reference, $0.code) }
        }
        if let code { matches = matches.filter { AdmissionCode.matches(code, $0.code) } }
        return matches
    }

    /// Admits `speaker`, keeping it in the file; its `letIn` is the caller's to call.
    mutating func admit(_ speaker: Waiting) throws(StateFile.Failure) {
        waiting.removeAll { $0.channel === speaker.channel }
        guard !isAdmitted(speaker.key) else { return }
        admitted.append(Admitted(name: speaker.name, key: speaker.key.text, admitted: Self.now()))
        try save()
    }

    /// Forgets every admitted speaker admitted under one of `names`, or whose key is one of
    /// `keys` (the room's connections now); returns the keys forgotten.
    mutating func forget(names: [String], keys: [PeerKey]) throws(StateFile.Failure) -> [String] {
        let texts = Set(keys.map(\.text))
        let gone = admitted.filter { names.contains($0.name) || texts.contains($0.key) }.map(\.key)
        guard !gone.isEmpty else { return [] }
        admitted.removeAll { gone.contains($0.key) }
        try save()
        return gone
    }

    private func save() throws(StateFile.Failure) {
        guard let path else { return }
        try StateFile.replaceJSON(path, with: File(speakers: admitted), what: "the admitted speakers")
    }

    private static func now() -> String { ISO8601DateFormatter().string(from: Date()) }
}

extension House {
    /// The admitted speakers' file in a state directory.
    public static let admittedSpeakersFileName = SpeakerAdmission.fileName

    /// Reads the admitted speakers' file at `path`, as a house will: `tutti server` refuses to
    /// start on one it cannot read, rather than run on and forget every admitted speaker.
    public static func checkAdmittedSpeakers(_ path: String) throws(StateFile.Failure) {
        _ = try SpeakerAdmission.read(path)
    }
}
