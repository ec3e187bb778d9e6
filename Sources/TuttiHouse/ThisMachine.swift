import NIOCore

/// This machine's own addresses: what a `Host` header may name (`HostAllowList`), and whether
/// a connection comes from this machine (`MPDPermissions`): a client here that connects to the
/// machine's LAN address is still here.
public enum ThisMachine {
    /// Whether `address` is a loopback address: IPv4's 127/8, `::1`, or 127/8 mapped into
    /// IPv6 (`::ffff:127.0.0.1`). Not NAT64's `64:ff9b::7f00:1`, which is a real address on the
    /// wire, routed to whoever answers for the prefix.
    public static func isLoopback(_ address: SocketAddress) -> Bool {
        switch address {
        case .v4(let v4):
            return UInt32(bigEndian: v4.address.sin_addr.s_addr) >> 24 == 127
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            if bytes == [UInt8](repeating: 0, count: 15) + [1] { return true }
            return bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] && bytes[12] == 127
        case .unixDomainSocket:
            return false
        }
    }

    /// Whether `address` is one of this machine's: loopback, or an address of one of its
    /// interfaces, read at each call (DHCP may change them). For a `Host` header's address
    /// literal, which names where the browser connected; a machine whose interfaces cannot be
    /// listed has its loopback addresses alone.
    public static func owns(_ address: SocketAddress) -> Bool {
        if isLoopback(address) { return true }
        guard let ip = address.ipAddress?.lowercased(), let devices = try? System.enumerateDevices() else { return false }
        return devices.contains { $0.address?.ipAddress?.lowercased() == ip }
    }

    /// Whether a connection from `peer` to `local` (the socket's own address) comes from this
    /// machine: a Unix socket, a loopback peer, or a peer whose address is the very address it
    /// connected to (a client here connecting to the LAN address). Comparing with the socket's
    /// own address, scope and all, rather than with every interface's: a stranger on one link
    /// can give the link-local address of another of this machine's interfaces as its source.
    public static func isConnectionFromHere(peer: SocketAddress?, local: SocketAddress?) -> Bool {
        switch peer {
        case .unixDomainSocket: return true
        case let peer?:
            if isLoopback(peer) { return true }
            guard let local else { return false }
            switch (peer, local) {
            case (.v4(let a), .v4(let b)):
                return a.address.sin_addr.s_addr == b.address.sin_addr.s_addr
            case (.v6(let a), .v6(let b)):
                let sameAddress = withUnsafeBytes(of: a.address.sin6_addr) { x in withUnsafeBytes(of: b.address.sin6_addr) { y in x.elementsEqual(y) } }
                return sameAddress && a.address.sin6_scope_id == b.address.sin6_scope_id
            default:
                return false
            }
        case nil: return false
        }
    }
}
