import FoundationEssentials

/// The params of Snapcast's control methods (JSON-RPC 2.0, doc/json_rpc_api/control.md in
/// badaix/snapcast), as their requests carry them, and how they are read.
public enum SnapcastParams {
    public struct ID: Decodable, Sendable, Equatable { public var id: String }

    public struct ClientSetVolume: Decodable, Sendable, Equatable {
        public struct Volume: Decodable, Sendable, Equatable {
            public var percent: Double?
            public var muted: Bool?
        }
        public var id: String
        public var volume: Volume
    }

    public struct ClientSetLatency: Decodable, Sendable, Equatable {
        public var id: String
        public var latency: Double
    }

    public struct SetName: Decodable, Sendable, Equatable {
        public var id: String
        public var name: String
    }

    public struct GroupSetMute: Decodable, Sendable, Equatable {
        public var id: String
        public var mute: Bool
    }

    public struct GroupSetStream: Decodable, Sendable, Equatable {
        public var id: String
        public var streamID: String
        public enum CodingKeys: String, CodingKey {
            case id
            case streamID = "stream_id"
        }
    }

    public struct GroupSetClients: Decodable, Sendable, Equatable {
        public var id: String
        public var clients: [String]
    }

    public struct StreamControl: Decodable, Sendable, Equatable {
        public struct Arguments: Decodable, Sendable, Equatable {
            public var offset: Double?
            public var position: Double?
        }
        public var id: String
        public var command: String
        public var params: Arguments?
    }

    public struct StreamSetProperty: Decodable, Sendable, Equatable {
        public var id: String
        public var property: String
        public var value: JSONValue
    }

    /// Params that are not what the method takes, in one line naming the field.
    public struct Invalid: Error, Sendable, Equatable {
        public var message: String
        public init(_ message: String) { self.message = message }
    }

    /// `params` read as `T` (absent params read as `{}`): a field missing or of the wrong type
    /// is named.
    public static func read<T: Decodable>(_ type: T.Type, _ params: JSONValue?) throws(Invalid) -> T {
        func field(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "params" : "\"" + path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") + "\""
        }
        let data: Data
        do { data = try JSONEncoder().encode(params ?? .object([:])) } catch {
            throw Invalid("params cannot be read: \(error)")
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch DecodingError.keyNotFound(let key, let context) {
            throw Invalid("\(field(context.codingPath + [key])) is missing")
        } catch DecodingError.typeMismatch(let expected, let context) {
            let kind = expected == String.self ? "a string" : expected == Bool.self ? "true or false"
                : expected == Double.self || expected == Int.self ? "a number" : String(describing: expected).hasPrefix("Array") ? "a list" : "an object"
            throw Invalid("\(field(context.codingPath)) must be \(kind)")
        } catch DecodingError.valueNotFound(_, let context) {
            throw Invalid("\(field(context.codingPath)) must not be null")
        } catch {
            throw Invalid("params cannot be read: \(error)")
        }
    }

    /// The params type each method with params takes, by method name.
    public static let types: [String: any (Decodable & Sendable).Type] = [
        "Client.GetStatus": ID.self, "Client.SetVolume": ClientSetVolume.self, "Client.SetLatency": ClientSetLatency.self,
        "Client.SetName": SetName.self, "Group.GetStatus": ID.self, "Group.SetMute": GroupSetMute.self,
        "Group.SetStream": GroupSetStream.self, "Group.SetClients": GroupSetClients.self, "Group.SetName": SetName.self,
        "Stream.Control": StreamControl.self, "Stream.SetProperty": StreamSetProperty.self,
    ]
}
