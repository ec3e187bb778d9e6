/// A group's AirPlay receiver as senders find it: a DNS-SD service of type `_raop._tcp` named
/// `DEVICEID@NAME` (the twelve hex digits AirPlay 1 takes for the receiver's MAC address, then
/// the name a phone's AirPlay menu shows), with what the receiver takes in TXT.
///
/// Pure data: the name and TXT are tested without a daemon.
public struct AirPlayAnnouncement: Sendable, Equatable {
    public static let serviceType = "_raop._tcp"

    /// Six bytes that name the receiver for good (senders remember receivers by them).
    public var deviceID: [UInt8]
    /// What the AirPlay menu shows: the group's name.
    public var name: String
    public var port: Int
    /// The receiver's Ed25519 public key (`pk`), which a sender paired with it checks.
    public var publicKey: [UInt8]?

    public init(deviceID: [UInt8], name: String, port: Int, publicKey: [UInt8]? = nil) {
        precondition(deviceID.count == 6, "an AirPlay device id is six bytes, got \(deviceID.count)")
        self.deviceID = deviceID
        self.name = name
        self.port = port
        self.publicKey = publicKey
    }

    /// `0A1B2C3D4E5F@Kitchen`.
    public var serviceName: String {
        deviceID.map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
        }.joined() + "@" + name
    }

    /// The AirPlay 2 service a receiver that pairs is also announced as, on the same port.
    public static let airPlay2ServiceType = "_airplay._tcp"

    /// AirPlay's feature bits (`ft`, `features`: the low 32 bits, then the high): audio (9);
    /// metadata as artwork, progress and text (15–17); PCM and ALAC (18, 19); a unified
    /// advertiser (30); AirPlay 2's unified media control (38), with which pyatv and Apple's
    /// senders speak AirPlay 2; CoreUtils pairing and encryption (48), with which they pair
    /// transiently. Not buffered audio (40) or PTP (41): those need nqptp (docs/AIRPLAY.md).
    public static let features: UInt64 = 1 << 9 | 1 << 15 | 1 << 16 | 1 << 17 | 1 << 18 | 1 << 19 | 1 << 30 | 1 << 38 | 1 << 48

    /// `0x400F8200,0x10040`.
    public static var featureText: String {
        "0x" + String(features & 0xFFFF_FFFF, radix: 16, uppercase: true) + ",0x" + String(features >> 32, radix: 16, uppercase: true)
    }

    /// What the receiver takes (docs/AIRPLAY.md): 44.1 kHz 16-bit stereo, PCM and ALAC (`cn=0,1`),
    /// no AirPlay 1 encryption (`et=0`; AirPlay 2's comes with pairing), metadata as text,
    /// artwork and progress (`md=0,1,2`), RTP over UDP, no password, and the features above.
    public var textRecord: [String] {
        ["txtvers=1", "ch=2", "cn=0,1", "et=0", "md=0,1,2", "pw=false", "sr=44100", "ss=16", "tp=UDP", "vn=65537", "da=true", "am=Tutti",
         "ft=\(Self.featureText)"]
    }

    /// The `_airplay._tcp` TXT: the device id as a MAC address, the features, the model, and
    /// access for everyone on the network (`acl=0`, no password).
    public var airPlay2TextRecord: [String] {
        let mac = deviceID.map { byte in String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true) }.joined(separator: ":")
        let pk = publicKey.map { ["pk=" + $0.map { String($0 >> 4, radix: 16) + String($0 & 0xF, radix: 16) }.joined()] } ?? []
        return ["deviceid=\(mac)", "features=\(Self.featureText)", "model=Tutti", "srcvers=366.0", "protovers=1.1", "acl=0", "flags=0x4", "pw=false"] + pk
    }
}
