import CGMP

/// A non-negative integer of any size, held by GMP: what SRP-6a's 3072-bit arithmetic is done
/// in. Values are immutable once made; each operation makes a new one.
///
/// Not thread-safe: a pairing computes on one loop.
final class GMPInteger {
    /// GMP's handle, on the heap so that one integer may be two operands of one call (a square)
    /// without overlapping Swift accesses.
    fileprivate let value: UnsafeMutablePointer<__mpz_struct>

    private init() {
        value = .allocate(capacity: 1)
        __gmpz_init(value)
    }

    deinit {
        __gmpz_clear(value)
        value.deallocate()
    }

    /// From big-endian bytes (leading zeros allowed).
    convenience init(bytes: some Collection<UInt8>) {
        self.init()
        let array = Array(bytes)
        guard !array.isEmpty else { return }
        array.withUnsafeBytes { raw in
            // order 1: most significant word first; 1-byte words; endian 1 (irrelevant at 1 byte).
            __gmpz_import(value, raw.count, 1, 1, 1, 0, raw.baseAddress)
        }
    }

    convenience init(_ small: UInt) {
        self.init()
        __gmpz_set_ui(value, small)
    }

    var isZero: Bool { value.pointee._mp_size == 0 }

    /// Big-endian bytes without leading zeros (one zero byte for zero).
    var bytes: [UInt8] {
        guard !isZero else { return [0] }
        let count = (__gmpz_sizeinbase(value, 2) + 7) / 8
        var out = [UInt8](repeating: 0, count: count)
        var written = 0
        out.withUnsafeMutableBytes { raw in
            _ = __gmpz_export(raw.baseAddress, &written, 1, 1, 1, 0, value)
        }
        precondition(written == count, "GMP exported \(written) bytes of a \(count)-byte integer")
        return out
    }

    /// Big-endian bytes left-padded with zeros to `width` (the value must fit).
    func bytes(paddedTo width: Int) -> [UInt8] {
        let minimal = isZero ? [] : bytes
        precondition(minimal.count <= width, "a \(minimal.count)-byte integer does not fit \(width) bytes")
        return [UInt8](repeating: 0, count: width - minimal.count) + minimal
    }

    static func * (lhs: GMPInteger, rhs: GMPInteger) -> GMPInteger {
        let result = GMPInteger()
        __gmpz_mul(result.value, lhs.value, rhs.value)
        return result
    }

    static func + (lhs: GMPInteger, rhs: GMPInteger) -> GMPInteger {
        let result = GMPInteger()
        __gmpz_add(result.value, lhs.value, rhs.value)
        return result
    }

    static func % (lhs: GMPInteger, modulus: GMPInteger) -> GMPInteger {
        precondition(!modulus.isZero, "a modulus of zero")
        let result = GMPInteger()
        __gmpz_mod(result.value, lhs.value, modulus.value)
        return result
    }

    /// `self^exponent mod modulus`, in time and memory access independent of the exponent
    /// (`mpz_powm_sec`): the exponent is a secret (SRP's private value, or the verifier's).
    /// The modulus must be odd; an exponent of zero gives one.
    func power(_ exponent: GMPInteger, modulo modulus: GMPInteger) -> GMPInteger {
        precondition(__gmpz_tstbit(modulus.value, 0) == 1, "powm_sec needs an odd modulus")
        guard !exponent.isZero else { return GMPInteger(1) % modulus }
        let result = GMPInteger()
        __gmpz_powm_sec(result.value, value, exponent.value, modulus.value)
        return result
    }
}
