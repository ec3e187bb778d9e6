/// The params of Snapcast's control methods, as their requests carry them.
enum SnapcastParams {
    struct ID: Decodable { var id: String }

    struct ClientSetVolume: Decodable {
        struct Volume: Decodable {
            var percent: Double?
            var muted: Bool?
        }
        var id: String
        var volume: Volume
    }

    struct ClientSetLatency: Decodable {
        var id: String
        var latency: Double
    }

    struct SetName: Decodable {
        var id: String
        var name: String
    }

    struct GroupSetMute: Decodable {
        var id: String
        var mute: Bool
    }

    struct GroupSetStream: Decodable {
        var id: String
        var streamID: String
        enum CodingKeys: String, CodingKey {
            case id
            case streamID = "stream_id"
        }
    }

    struct GroupSetClients: Decodable {
        var id: String
        var clients: [String]
    }

    struct StreamControl: Decodable {
        struct Arguments: Decodable {
            var offset: Double?
            var position: Double?
        }
        var id: String
        var command: String
        var params: Arguments?
    }

    struct StreamSetProperty: Decodable {
        var id: String
        var property: String
        var value: JSONValue
    }
}
