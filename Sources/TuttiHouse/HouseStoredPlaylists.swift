import Foundation
import TuttiProtocol

/// Stored playlists (MPD's `save`, `load`, `listplaylists`, `rm`): a queue kept by name, in
/// memory on the loop and in the store. A playlist keeps paths, not tags: loading one adds new
/// queue entries.
extension House {
    var playlistsReport: StoredPlaylistsReport {
        StoredPlaylistsReport(playlists: storedPlaylists.values.sorted { $0.name < $1.name })
    }

    /// `playlist-save`: the queue as it is, under `name`.
    func savePlaylist(named name: String) -> StoredPlaylistsReport {
        let playlist = StoredPlaylistsReport.Playlist(name: name, files: state.queue, modifiedSeconds: Date().timeIntervalSince1970)
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
