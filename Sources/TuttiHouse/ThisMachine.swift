import NIOCore
import TuttiCore

/// This machine's own addresses: what a `Host` header may name (`HostAllowList`) and where an
/// MPD client counts as local (`MPDPermissions`). A client on this machine that connects to
/// its LAN address is still on this machine.
public enum ThisMachine {
    /// Whether `address` is one of this machine's: a loopback address (IPv4-mapped or not), or
    /// an address of one of its interfaces, read at each call (DHCP may change them). A machine
    /// whose interfaces cannot be listed has its loopback addresses alone.
    public static func owns(_ address: SocketAddress) -> Bool {
        switch address {
        case .v4(let v4) where IPAddressKind(v4.address) == .loopback: return true
        case .v6(let v6) where IPAddressKind(v6.address) == .loopback: return true
        case .unixDomainSocket: return false
        default:
            guard let ip = address.ipAddress?.lowercased(), let devices = try? System.enumerateDevices() else { return false }
            return devices.contains { $0.address?.ipAddress?.lowercased() == ip }
        }
    }
}
