import NIOCore
import TuttiCore
import TuttiHouse

/// MPD's permissions (read, add, control, admin), what each command needs, and what a
/// connection starts with.
///
/// As in MPD 0.23: `password PASS` gives the permissions `--mpd-password PASS@…` lists;
/// without one a client has `--mpd-default-permissions`. With neither option, a client on this
/// machine (a loopback peer) has all four and any other `read`, so a stranger on the LAN can
/// look but not play, queue or reconfigure; the refusal says how to grant more. MPD's password
/// crosses the network in clear text, as MPD's manual says of its own (docs/SECURITY.md).
public struct MPDPermissions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public static let read = MPDPermissions(rawValue: 1)
    public static let add = MPDPermissions(rawValue: 2)
    public static let control = MPDPermissions(rawValue: 4)
    public static let admin = MPDPermissions(rawValue: 8)
    public static let all: MPDPermissions = [.read, .add, .control, .admin]

    /// `read,add,control,admin` (any of them, in any order); nil for a word that is not one.
    /// An empty list is no permission at all.
    public init?(list: some StringProtocol) {
        var permissions: MPDPermissions = []
        guard !list.isEmpty else { self = []; return }
        for word in list.split(separator: ",", omittingEmptySubsequences: false) {
            switch word.trimmingCharacters(in: .whitespaces).lowercased() {
            case "read": permissions.insert(.read)
            case "add": permissions.insert(.add)
            case "control": permissions.insert(.control)
            case "admin": permissions.insert(.admin)
            default: return nil
            }
        }
        self = permissions
    }

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `PASS@read,add,control,admin` (`--mpd-password`): the password and what it gives; nil
    /// when it is not that.
    public static func password(_ spec: String) -> (password: String, permissions: MPDPermissions)? {
        guard let at = spec.lastIndex(of: "@"), at != spec.startIndex, let permissions = MPDPermissions(list: spec[spec.index(after: at)...]),
              !permissions.isEmpty else { return nil }
        return (String(spec[..<at]), permissions)
    }

    /// Its words, as a refusal or `--help` names them.
    var words: String {
        [(MPDPermissions.read, "read"), (.add, "add"), (.control, "control"), (.admin, "admin")].filter { contains($0.0) }.map(\.1).joined(separator: ",")
    }

    /// The permissions a connection from `peer` to `local` (the socket's own address) starts
    /// with.
    static func initial(for peer: SocketAddress?, local: SocketAddress?, defaultPermissions: MPDPermissions?) -> MPDPermissions {
        if let defaultPermissions { return defaultPermissions }
        return ThisMachine.isConnectionFromHere(peer: peer, local: local) ? .all : .read
    }

    /// What a command needs (MPD's own table, src/command/AllCommands.cxx; MPD 0.24's `player`
    /// is 0.23's `control`): nothing for the commands about the connection itself.
    static func required(for command: String) -> MPDPermissions {
        switch command {
        case "binarylimit", "close", "commands", "notcommands", "password", "ping", "tagtypes":
            return []
        case "add", "addid", "findadd", "load", "searchadd":
            return .add
        case "clear", "consume", "crossfade", "delete", "deleteid", "move", "moveid", "next", "pause", "play", "playid", "playlistadd",
             "previous", "random", "repeat", "replay_gain_mode", "rescan", "rm", "save", "searchaddpl", "findaddpl", "seek", "seekcur", "seekid", "setvol",
             "shuffle", "single", "stop", "swap", "swapid", "update", "volume":
            return .control
        case "delpartition", "disableoutput", "enableoutput", "moveoutput", "newpartition", "toggleoutput":
            return .admin
        default:
            // Every other command reads (status, find, idle, outputs, partition…), and an
            // unknown one is refused as unknown before this matters.
            return .read
        }
    }
}
