import Crypto

/// The accessory's side of SRP-6a as HomeKit's pair-setup runs it (AirPlay 2's pairing): the
/// 3072-bit group of RFC 5054 with SHA-512, user name `Pair-Setup`, the PIN as password.
///
/// The proofs follow RFC 5054 and the `srptools` package pyatv pairs with: `k = H(N | PAD(g))`,
/// `u = H(PAD(A) | PAD(B))`, `x = H(s | H(I ":" P))`, `K = H(S)`,
/// `M1 = H(H(N) xor H(g) | H(I) | s | A | B | K)`, `M2 = H(A | M1 | K)`. Integers are hashed
/// without leading zeros, as `srptools` does; where A or B has one, Apple's code pads them to
/// the group's size, so a proof in either form is taken and answered in the same form.
///
/// Not thread-safe: one pairing, on one loop.
struct SRPServer {
    struct Failure: Error, Equatable, CustomStringConvertible {
        var description: String
    }

    /// RFC 5054's 3072-bit group: its prime N (big-endian) and generator g.
    static let prime: [UInt8] = Hex.decode("""
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
        EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F\
        83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B\
        E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510\
        15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7\
        ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C\
        BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF
        """)!
    static let generator: UInt = 5
    static let username = "Pair-Setup"

    let salt: [UInt8]
    /// B, padded to the group's size, as sent in M2.
    let publicKey: [UInt8]
    private let verifier: GMPInteger
    private let privateValue: GMPInteger
    private let n: GMPInteger

    /// A new exchange for `password` (the PIN), with a random salt and private value.
    init(password: String) {
        func random(_ count: Int) -> [UInt8] { SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) } }
        self.init(password: password, salt: random(16), privateValue: random(32))
    }

    /// The same with a given salt and private value: for tests against another implementation.
    init(password: String, salt: [UInt8], privateValue: [UInt8]) {
        let n = GMPInteger(bytes: Self.prime), g = GMPInteger(Self.generator)
        let x = GMPInteger(bytes: Self.hash(salt, Self.hash(Array("\(Self.username):\(password)".utf8))))
        let v = g.power(x, modulo: n)
        let b = GMPInteger(bytes: privateValue)
        let k = GMPInteger(bytes: Self.hash(Self.prime, g.bytes(paddedTo: Self.prime.count)))
        self.salt = salt
        self.n = n
        verifier = v
        self.privateValue = b
        publicKey = ((k * v + g.power(b, modulo: n)) % n).bytes(paddedTo: Self.prime.count)
    }

    /// Checks the client's proof M1 against its public value A; returns the server's proof M2
    /// and the session key K (from which the channel's keys are derived).
    func verify(clientPublicKey: [UInt8], clientProof: [UInt8]) throws(Failure) -> (serverProof: [UInt8], sessionKey: [UInt8]) {
        let a = GMPInteger(bytes: clientPublicKey)
        guard clientPublicKey.count <= Self.prime.count, !(a % n).isZero else {
            throw Failure(description: "the client's public value is not in the group")
        }
        let width = Self.prime.count
        let b = GMPInteger(bytes: publicKey)
        let u = GMPInteger(bytes: Self.hash(a.bytes(paddedTo: width), b.bytes(paddedTo: width)))
        // S = (A · v^u)^b mod N
        let s = ((a * verifier.power(u, modulo: n)) % n).power(privateValue, modulo: n)
        let key = Self.hash(s.bytes)
        let hn = Self.hash(Self.prime), hg = Self.hash(GMPInteger(Self.generator).bytes)
        let nXorG = GMPInteger(bytes: zip(hn, hg).map { $0 ^ $1 }).bytes
        let hi = GMPInteger(bytes: Self.hash(Array(Self.username.utf8))).bytes
        for (aBytes, bBytes) in [(a.bytes, b.bytes), (a.bytes(paddedTo: width), b.bytes(paddedTo: width))] {
            let expected = Self.hash(nXorG, hi, salt, aBytes, bBytes, key)
            if Self.constantTimeEqual(expected, clientProof) {
                return (Self.hash(aBytes, expected, key), key)
            }
        }
        throw Failure(description: "the client's proof is wrong (a wrong PIN)")
    }

    static func hash(_ parts: [UInt8]...) -> [UInt8] {
        var hasher = SHA512()
        for part in parts { hasher.update(data: part) }
        return Array(hasher.finalize())
    }

    private static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
