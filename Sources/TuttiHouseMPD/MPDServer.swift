import Foundation
import NIOCore
import TuttiHouse
import TuttiProtocol

/// The house as an MPD server (`tutti server --mpd HOST:PORT`, 6600 by default), so that the
/// clients people already use (mpc, ncmpcpp, M.A.L.P., Cantata) control it: the queue, the
/// library, the group's volume, and the rooms as MPD's outputs.
///
/// Each connection is an `MPDSession` on a task of its own; the house is reached only through
/// what every front end uses (`House.perform`, `observeChanges`, `artwork(forTrack:)`).
/// Thread-safety: `start` and `stop` from any thread, once each.
public final class MPDServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "0.0.0.0"
        public var port = 6600
        /// A line longer than this closes its connection, as MPD does.
        public var maximumLineBytes = 64 * 1024
        /// Clients served at once (MPD's `max_connections`, 100).
        public var maximumConnections = 100
        /// A client that sends nothing for this long, unless it is in `idle`, is closed (MPD's
        /// `connection_timeout`, 60 s).
        public var connectionTimeout: Duration = .seconds(60)
        /// Commands in one command list; a longer list is refused whole (MPD caps its size
        /// likewise, `max_command_list_size`).
        public var maximumCommandListLength = 10_000
        public var limits = FrontEndLimits()
        /// `password PASS` gives these (`--mpd-password PASS@read,add,control,admin`).
        public var passwords: [String: MPDPermissions] = [:]
        /// What a client has before a password (`--mpd-default-permissions`); nil: all on this
        /// machine, `read` elsewhere (`MPDPermissions.initial`).
        public var defaultPermissions: MPDPermissions?
        public init() {}
    }

    /// When the first server started (`stats`' uptime).
    static let started = ProcessInfo.processInfo.systemUptime

    private let house: House
    private let configuration: Configuration
    private let listener: LineProtocolListener

    public init(house: House, configuration: Configuration = Configuration()) {
        self.house = house
        self.configuration = configuration
        _ = Self.started
        var listening = LineProtocolListener.Configuration(host: configuration.host, port: configuration.port,
                                                           maximumLineBytes: configuration.maximumLineBytes)
        listening.maximumConnections = configuration.maximumConnections
        let uris = MPDSongURIs(roots: house.configuration.musicDirectories), version = MPDPlaylistVersion()
        let partitionClients = MPDPartitionClients(), updateJobs = MPDUpdateJobs()
        listener = LineProtocolListener(name: "MPD clients", configuration: listening, log: { house.note($0) },
                                        refusal: { ByteBuffer(string: MPDError(.system, $0).line(command: "", index: 0)) }) { connection in
            var session = MPDSession(house: house, uris: uris, playlistVersion: version, partitionClients: partitionClients,
                                     updateJobs: updateJobs, configuration: configuration)
            await session.run(connection)
        }
    }

    /// Binds and serves; returns the port it listens on.
    public func start() async throws -> Int { try await listener.start() }

    public func stop() async { await listener.stop() }
}
