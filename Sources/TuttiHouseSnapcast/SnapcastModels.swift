/// The house as Snapcast's control API describes a server (doc/json_rpc_api/control.md in
/// badaix/snapcast): `Server.GetStatus`'s tree of groups, clients and streams, and the results
/// of the methods that set one thing. Built by `SnapcastServerStatus`.
enum Snapcast {
    struct StatusResult: Codable, Sendable {
        var server: Server
    }

    struct Server: Codable, Sendable {
        var groups: [Group]
        var server: ServerInfo
        var streams: [Stream]
    }

    struct ServerInfo: Codable, Sendable {
        var host: Host
        var snapserver: Snapserver
    }

    struct Host: Codable, Sendable {
        var arch: String
        var ip: String
        var mac: String
        var name: String
        var os: String
    }

    struct Snapserver: Codable, Sendable {
        var controlProtocolVersion: Int
        var name: String
        var protocolVersion: Int
        var version: String
    }

    struct Group: Codable, Sendable {
        var id: String
        var name: String
        var muted: Bool
        var streamID: String
        var clients: [Client]

        enum CodingKeys: String, CodingKey {
            case id, name, muted, clients
            case streamID = "stream_id"
        }
    }

    struct Client: Codable, Sendable {
        var id: String
        var connected: Bool
        var lastSeen: Time
        var host: Host
        var config: ClientConfig
        var snapclient: Snapclient
    }

    struct Time: Codable, Sendable {
        var sec: Int
        var usec: Int
    }

    struct ClientConfig: Codable, Sendable {
        var instance: Int
        var latency: Int
        var name: String
        var volume: Volume
    }

    struct Volume: Codable, Sendable {
        var muted: Bool
        var percent: Int
    }

    struct Snapclient: Codable, Sendable {
        var name: String
        var protocolVersion: Int
        var version: String
    }

    struct Stream: Codable, Sendable {
        var id: String
        var status: String
        var properties: StreamProperties
        var uri: StreamURI
    }

    /// What the stream plays, MPRIS-like.
    struct StreamProperties: Codable, Sendable {
        var playbackStatus: String
        var loopStatus: String
        var shuffle: Bool
        var volume: Int
        var mute: Bool
        var rate: Double
        var canGoNext: Bool
        var canGoPrevious: Bool
        var canPlay: Bool
        var canPause: Bool
        var canSeek: Bool
        var canControl: Bool
        var metadata: Metadata
        var position: Double?
    }

    struct Metadata: Codable, Sendable {
        var title: String?
        var artist: [String]?
        var album: String?
        var duration: Double?
        var artUrl: String?
    }

    struct StreamURI: Codable, Sendable {
        var raw: String
        var scheme: String
        var host: String
        var path: String
        var fragment: String
        var query: [String: String]
    }

    // MARK: Results of the methods that set one thing

    struct RPCVersion: Codable, Sendable { var major, minor, patch: Int }
    struct ClientResult: Codable, Sendable { var client: Client }
    struct GroupResult: Codable, Sendable { var group: Group }
    struct VolumeResult: Codable, Sendable { var volume: Volume }
    struct LatencyResult: Codable, Sendable { var latency: Int }
    struct NameResult: Codable, Sendable { var name: String }
    struct MuteResult: Codable, Sendable { var mute: Bool }
    struct StreamResult: Codable, Sendable {
        var streamID: String
        enum CodingKeys: String, CodingKey { case streamID = "stream_id" }
    }
}
