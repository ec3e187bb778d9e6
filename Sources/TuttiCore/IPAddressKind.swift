#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What kind of special address an IP address is, if any: the one classifier behind every
/// decision the house makes about where a peer or a URL is (an MPD client on this machine, a
/// browser's Host, a URL the house must not fetch). IPv4 addresses in IPv6 clothes, mapped
/// (`::ffff:a.b.c.d`) or through NAT64 (`64:ff9b::a.b.c.d`), are what they carry.
public enum IPAddressKind: Sendable, Equatable {
    case loopback
    case unspecified
    case linkLocal
    case multicast
    case broadcast

    /// An IPv4 address in host byte order; nil for an ordinary one.
    public init?(ipv4 address: UInt32) {
        switch address >> 24 {
        case 127: self = .loopback
        case 0: self = .unspecified
        case 224...239: self = .multicast
        default:
            if address >> 16 == 0xa9fe { self = .linkLocal }  // 169.254/16, where clouds keep their metadata
            else if address == 0xffff_ffff { self = .broadcast }
            else { return nil }
        }
    }

    /// An IPv6 address's 16 bytes; nil for an ordinary one.
    public init?(ipv6 bytes: [UInt8]) {
        precondition(bytes.count == 16, "an IPv6 address is 16 bytes")
        if bytes[0..<15].allSatisfy({ $0 == 0 }) {
            switch bytes[15] {
            case 1: self = .loopback
            case 0: self = .unspecified
            default: return nil
            }
            return
        }
        if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { self = .linkLocal; return }
        if bytes[0] == 0xff { self = .multicast; return }
        let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        let nat64 = bytes[0..<12] == [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0][...]
        guard mapped || nat64 else { return nil }
        self.init(ipv4: UInt32(bytes[12]) << 24 | UInt32(bytes[13]) << 16 | UInt32(bytes[14]) << 8 | UInt32(bytes[15]))
    }

    /// A socket's IPv4 address (`SocketAddress.v4`'s `address`); nil for an ordinary one.
    public init?(_ address: sockaddr_in) {
        self.init(ipv4: UInt32(bigEndian: address.sin_addr.s_addr))
    }

    /// A socket's IPv6 address (`SocketAddress.v6`'s `address`); nil for an ordinary one.
    public init?(_ address: sockaddr_in6) {
        var storage = address.sin6_addr
        self.init(ipv6: withUnsafeBytes(of: &storage) { Array($0) })
    }

    /// As a refusal says it: "a loopback address".
    public var description: String {
        switch self {
        case .loopback: "a loopback address"
        case .unspecified: "the unspecified address"
        case .linkLocal: "a link-local address"
        case .multicast: "a multicast address"
        case .broadcast: "the broadcast address"
        }
    }
}
