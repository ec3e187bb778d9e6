import Foundation
import TuttiMedia
import TuttiProtocol

extension House {
    /// The cover a group's live source (an AirPlay sender) sent, for `/api/artwork?live=GROUP`
    /// (the group's name or id). Thread-safety: any thread.
    public func liveArtwork(group reference: String) async -> Result<Artwork, ControlRefusal> {
        let core = self.core
        let found = try? await loop.submit { () -> Result<Artwork, ControlRefusal> in
            let house = core.value
            let group: GroupSession
            do throws(ControlRefusal) { group = try house.group(named: reference) } catch { return .failure(error) }
            guard let live = group.live, group.liveStream != nil else {
                return .failure(ControlRefusal("artwork: \(group) plays no live source", kind: .notFound))
            }
            guard let artwork = live.artwork else { return .failure(ControlRefusal("artwork: \(live.source) sent no cover", kind: .notFound)) }
            return .success(Artwork(bytes: artwork.bytes, mimeType: artwork.type, source: live.source))
        }.get()
        // A house whose loop has stopped has nothing to show.
        return found ?? .failure(ControlRefusal("artwork: the house is stopping", kind: .notFound))
    }

    /// A track's cover art (`Artwork`: embedded, else `cover.jpg` and the like beside it), for
    /// the web UI's now playing and library views and the API's `/api/artwork`.
    ///
    /// Only for files the house would play (`MediaAccess`): artwork is read from the file, so
    /// the same directories bound it. Read on a background queue, never on the house's loop.
    /// Thread-safety: any thread.
    public func artwork(forTrack path: String) async -> Result<Artwork, ControlRefusal> {
        guard MediaAccess.scheme(of: path) == nil, path != "-", !path.hasPrefix("pipe:") else {
            return .failure(ControlRefusal("artwork: \(path): only files have artwork", kind: .invalid))
        }
        let access = MediaAccess(allowedDirectories: configuration.allowedDirectories.map { $0 + configuration.musicDirectories })
        if let refusal = access.refusal(for: path) { return .failure(refusal) }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(MediaError) {
                    guard let artwork = try Artwork.read(forTrack: path) else {
                        continuation.resume(returning: .failure(ControlRefusal("\(path): no artwork in the file or beside it", kind: .notFound)))
                        return
                    }
                    continuation.resume(returning: .success(artwork))
                } catch {
                    let kind: ControlRefusal.Kind = error.kind == .notFound ? .notFound : .unplayable
                    continuation.resume(returning: .failure(ControlRefusal("\(path): \(error.reason)", kind: kind)))
                }
            }
        }
    }
}
