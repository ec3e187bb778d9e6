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

    public init(deviceID: [UInt8], name: String, port: Int) {
        precondition(deviceID.count == 6, "an AirPlay device id is six bytes, got \(deviceID.count)")
        self.deviceID = deviceID
        self.name = name
        self.port = port
    }

    /// `0A1B2C3D4E5F@Kitchen`.
    public var serviceName: String {
        deviceID.map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
        }.joined() + "@" + name
    }

    /// What the receiver takes (docs/AIRPLAY.md): 44.1 kHz 16-bit stereo, PCM and ALAC (`cn=0,1`),
    /// no encryption (`et=0`), metadata as text, artwork and progress (`md=0,1,2`), RTP over
    /// UDP, no password.
    public var textRecord: [String] {
        ["txtvers=1", "ch=2", "cn=0,1", "et=0", "md=0,1,2", "pw=false", "sr=44100", "ss=16", "tp=UDP", "vn=65537", "da=true", "am=Tutti"]
    }
}
