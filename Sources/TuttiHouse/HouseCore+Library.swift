import Foundation
import NIOCore
import TuttiMedia
import TuttiProtocol

/// The house's music library: scanned on a thread of its own, queried off the event loop (the
/// loop answers the rooms, and an FTS query over a large library can take milliseconds).
extension House {
    /// Scans the library's roots in the background, then follows them with inotify
    /// (`LibraryWatcher`); progress goes to the log (a line at the start, one every 1000
    /// files, one at the end, one per change on disk) and to observers (`status.library`).
    public func startLibraryScan() {
        guard let library else { return }
        let roots = configuration.musicDirectories, log = self.log, loop = self.loop, core = self.core
        log("library: scanning \(roots.joined(separator: ", "))")
        // One writer at a time: the watcher's updates wait for the first scan to end.
        let writing = NSLock()
        let watcher = LibraryWatcher(roots: roots, log: log) { changes in
            writing.lock()
            defer { writing.unlock() }
            do {
                let result = try LibraryScanner(roots: roots, library: library).update(changes)
                guard result.read > 0 || result.removed > 0 else { return }
                let counts = (try? library.counts()) ?? (tracks: 0, unreadable: 0)
                log("library: changes on disk: \(result.read) files read" + (result.unreadable > 0 ? " (\(result.unreadable) unreadable)" : "")
                    + ", \(result.removed) removed; \(counts.tracks) tracks")
                loop.execute {
                    core.value.librarySize = counts
                    core.value.loudnessCache.removeAll()
                    core.value.noteChange()
                }
            } catch {
                log("library: could not follow changes on disk: \(error); the next start rescans")
            }
        }
        // Watching starts before the scan, so that nothing written during it is missed.
        do {
            try watcher.start()
            log("library: watching \(watcher.watchedCount) \(watcher.watchedCount == 1 ? "directory" : "directories") for changes")
            loop.execute { core.value.libraryWatcher = watcher }
        } catch {
            log("library: cannot watch for changes (\(error)); the next start rescans")
        }
        let thread = Thread {
            writing.lock()
            defer { writing.unlock() }
            let started = Date()
            var lastLogged = 0
            do {
                let final = try LibraryScanner(roots: roots, library: library).scan { progress in
                    if progress.done - lastLogged >= 1000 && !progress.finished {
                        lastLogged = progress.done
                        log("library: \(progress.done) of \(progress.total) files looked at, \(progress.read) read")
                    }
                    let counts = try? library.counts()
                    loop.execute {
                        core.value.libraryScan = progress
                        // What the batch measured is looked up afresh (`loudness(ofPath:)`).
                        core.value.loudnessCache.removeAll()
                        if let counts { core.value.librarySize = counts }
                        core.value.noteChange()
                    }
                }
                let seconds = Date().timeIntervalSince(started)
                let counts = (try? library.counts()) ?? (tracks: 0, unreadable: 0)
                log("library: \(final.total) files in \(String(format: "%.1f", seconds)) s: \(final.read) read, \(final.removed) removed, "
                    + "\(final.measured) measured for loudness; "
                    + "\(counts.tracks) tracks, \(counts.unreadable) unreadable" + (counts.unreadable > 0 ? " (tutti ctl library problems)" : ""))
            } catch {
                log("library: the scan stopped: \(error); the library keeps what it had")
                loop.execute { core.value.libraryScan?.finished = true }
            }
        }
        thread.name = "tutti library scan"
        thread.start()
    }

    /// The library's tags of the files at `paths` (queue items, for front ends that show them:
    /// MPD's `playlistinfo`), read off the loop; empty without a library.
    /// Thread-safety: any thread.
    public func libraryTracks(atPaths paths: [String]) async -> [String: LibraryTrack] {
        guard let library, !paths.isEmpty else { return [:] }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: (try? library.tracks(atPaths: paths)) ?? [:]) }
        }
    }

}

extension HouseCore {
    /// The library's part of the status.
    var libraryStatus: LibraryStatus? {
        guard library != nil else { return nil }
        let scan = libraryScan
        return LibraryStatus(tracks: librarySize.tracks, unreadable: librarySize.unreadable, scanning: scan.map { !$0.finished } ?? true,
                             scannedFiles: scan?.done ?? 0, foundFiles: scan?.total ?? 0)
    }

    /// Answers a library command off the loop; `respond` is called on it.
    func queryLibrary(_ command: ControlCommand, _ respond: @escaping House.Respond) throws {
        guard let library else { throw ControlRefusal("the house has no library: start it with --music DIR", kind: .conflict) }
        let loop = self.loop
        let bound = NIOLoopBound(respond, eventLoop: loop)
        DispatchQueue.global().async {
            let result: Result<ControlReply, ControlRefusal>
            do {
                switch command {
                case .librarySearch(let query, let limit):
                    result = .success(.library(LibraryBrowseReport(tracks: try library.search(query, limit: limit ?? 100))))
                case .libraryBrowse(let artist, let album):
                    result = .success(.library(try library.browse(artist: artist, album: album)))
                default:
                    result = .success(.library(LibraryBrowseReport(problems: try library.unreadableFiles())))
                }
            } catch {
                result = .failure(ControlRefusal("library: \(error)", kind: .conflict))
            }
            loop.execute { bound.value(result) }
        }
    }
}

/// Stored playlists (MPD's `save`, `load`, `listplaylists`, `rm`): a queue kept by name, in
/// memory on the loop and in the store. A playlist keeps paths, not tags: loading one adds new
/// queue entries. They belong to the house, not to a group: any group saves and loads them.
extension HouseCore {
    var playlistsReport: StoredPlaylistsReport {
        StoredPlaylistsReport(playlists: storedPlaylists.values.sorted { $0.name < $1.name })
    }

    /// `playlist-save`: a group's queue as it is (`files`), under `name`.
    func savePlaylist(named name: String, files: [String]) -> StoredPlaylistsReport {
        let playlist = StoredPlaylistsReport.Playlist(name: name, files: files, modifiedSeconds: Date().timeIntervalSince1970)
        storedPlaylists[name] = playlist
        stored(store?.savePlaylist(playlist))
        return playlistsReport
    }

    func removePlaylist(named name: String) throws(ControlRefusal) -> StoredPlaylistsReport {
        guard storedPlaylists.removeValue(forKey: name) != nil else { throw noSuchPlaylist(name) }
        stored(store?.deletePlaylist(named: name))
        return playlistsReport
    }

    /// The files of playlist `name`.
    func playlistFiles(named name: String) throws(ControlRefusal) -> [String] {
        guard let playlist = storedPlaylists[name] else { throw noSuchPlaylist(name) }
        return playlist.files
    }

    private func noSuchPlaylist(_ name: String) -> ControlRefusal {
        let known = storedPlaylists.keys.sorted()
        return ControlRefusal("no stored playlist named \(name) (stored: \(known.isEmpty ? "none" : known.joined(separator: ", ")))", kind: .notFound)
    }
}

extension HouseCore {
    /// The library's loudness of the file at `path` and of its album; for an item the library
    /// does not hold (a URL, a file outside `--music`), what was measured as it played, if it
    /// was. Read on the loop (one indexed row, and its album's for an untagged album) and kept
    /// until the library changes.
    func loudness(ofPath path: String) -> (track: Loudness?, album: Loudness?)? {
        if let cached = loudnessCache[path] { return cached }
        var found: (track: Loudness?, album: Loudness?)?
        if let library {
            do {
                found = try library.loudness(atPaths: [path])[path]
            } catch {
                // The item plays at the missing preamp's gain; said once per path.
                log("library: cannot read the loudness of \(path) (\(error)); it plays without its replay gain")
            }
        }
        if found?.track == nil, let played = playedLoudness[path] { found = (played, nil) }
        loudnessCache[path] = .some(found)
        return found
    }

    /// Keeps the loudness the engine measured of an item outside the library as it played
    /// through: its gain from its next play (what is decoded already plays on as it is).
    func rememberPlayedLoudness(_ loudness: Loudness, ofPath path: String) {
        guard playedLoudness[path] != loudness else { return }
        playedLoudness[path] = loudness
        loudnessCache[path] = nil
        log("replay gain: \(path) measured as it played, \(String(format: "%.1f", loudness.integratedLUFS)) LUFS, "
            + "peak \(String(format: "%.2f", loudness.peak)); its own gain from its next play")
        if let store { stored(store.savePlayedLoudness(loudness, ofInput: path, at: Date().timeIntervalSince1970)) }
        // Engines playing take the new gain for the item's readings still to come (a later
        // copy in the queue, the next pass); entries match by tag, so nothing decoded is cut.
        for group in groups.values where group.replayGain.mode != .off { group.engineFollowsQueue() }
    }
}
