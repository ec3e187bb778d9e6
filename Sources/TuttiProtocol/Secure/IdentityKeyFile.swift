#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a house or a speaker keeps its identity key: `<state-dir>/identity-key`, mode 0600,
/// made on the first start. Deleting it gives a new identity: the speakers admitted to a house
/// then refuse it until they are told to forget it, and a speaker must be admitted again.
public enum IdentityKeyFile {
    public static let fileName = "identity-key"

    /// The identity in `directory`, made there (with the directory) if there is none yet; and
    /// whether it was made now.
    public static func readOrCreate(in directory: String) throws(StateFile.Failure) -> (identity: IdentityKey, created: Bool) {
        let made = try StateFile.readOrCreate(fileName, in: directory, what: "the identity key") { IdentityKey.random().text + "\n" }
        guard let identity = IdentityKey(text: made.text) else {
            throw StateFile.Failure(description: "\(StateFile.path(fileName, in: directory)) is not an identity key (43 characters of base64url); remove it to make a new one")
        }
        return (identity, made.created)
    }
}
