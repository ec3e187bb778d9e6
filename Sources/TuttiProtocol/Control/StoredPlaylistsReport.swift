/// The playlists the house keeps by name (MPD's stored playlists): `playlists`,
/// `playlist-save` and `playlist-remove` answer with every one of them.
public struct StoredPlaylistsReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    public struct Playlist: Codable, Sendable, Equatable {
        public var name: String
        /// Paths and URLs, in order.
        public var files: [String]
        /// When it was last saved, in seconds since 1970.
        public var modifiedSeconds: Double
        public init(name: String, files: [String], modifiedSeconds: Double) {
            self.name = name
            self.files = files
            self.modifiedSeconds = modifiedSeconds
        }
    }

    /// By name.
    public var playlists: [Playlist]
    public init(playlists: [Playlist]) { self.playlists = playlists }
}
