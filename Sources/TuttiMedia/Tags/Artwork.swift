import CFFmpeg
import Foundation

/// A track's cover art: the picture embedded in the file (ID3 APIC, FLAC PICTURE, MP4 covr,
/// Vorbis/Opus METADATA_BLOCK_PICTURE), else an image beside it (`cover.jpg`, `folder.jpg`,
/// `front.jpg`, `album.jpg`, or `.png`, in any case), as MPD and most players look for it.
public struct Artwork: Sendable, Equatable {
    public var bytes: [UInt8]
    /// `image/jpeg`, `image/png`, …
    public var mimeType: String
    /// Where it came from: "embedded", or the image file's path.
    public var source: String

    public init(bytes: [UInt8], mimeType: String, source: String) {
        self.bytes = bytes
        self.mimeType = mimeType
        self.source = source
    }

    /// The largest picture served; anything bigger is not a cover.
    public static let maximumBytes = 16 << 20

    /// The track's artwork, or nil when it has none. Throws when the track itself cannot be
    /// opened (no such file, not media).
    /// Thread-safety: any thread.
    public static func read(forTrack path: String) throws(MediaError) -> Artwork? {
        if let embedded = try embedded(in: path) { return embedded }
        return beside(path)
    }

    static let sideImageNames = ["cover", "folder", "front", "album"]

    private static func embedded(in path: String) throws(MediaError) -> Artwork? {
        var context: UnsafeMutablePointer<AVFormatContext>? = nil
        let status = avformat_open_input(&context, path, nil, nil)
        guard status >= 0, let format = context else { throw AudioFileDecoder.openError(path: path, status: status) }
        defer { avformat_close_input(&context) }
        for i in 0..<Int(format.pointee.nb_streams) {
            let stream = format.pointee.streams[i]!
            guard stream.pointee.disposition & tutti_disposition_attached_pic() != 0 else { continue }
            let picture = stream.pointee.attached_pic
            guard let data = picture.data, picture.size > 0, Int(picture.size) <= maximumBytes else { continue }
            let mime: String
            switch stream.pointee.codecpar.pointee.codec_id {
            case AV_CODEC_ID_MJPEG: mime = "image/jpeg"
            case AV_CODEC_ID_PNG: mime = "image/png"
            case AV_CODEC_ID_GIF: mime = "image/gif"
            case AV_CODEC_ID_WEBP: mime = "image/webp"
            case AV_CODEC_ID_BMP: mime = "image/bmp"
            default: continue
            }
            return Artwork(bytes: Array(UnsafeBufferPointer(start: data, count: Int(picture.size))), mimeType: mime, source: "embedded")
        }
        return nil
    }

    private static func beside(_ path: String) -> Artwork? {
        let directory = (path as NSString).deletingLastPathComponent
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) else { return nil }
        // Preference order: the name (cover before folder …), then JPEG before PNG.
        var best: (rank: Int, name: String, mime: String)?
        for name in names {
            let lower = name.lowercased()
            let stem = (lower as NSString).deletingPathExtension, ext = (lower as NSString).pathExtension
            guard let nameRank = sideImageNames.firstIndex(of: stem) else { continue }
            let mime: String
            switch ext {
            case "jpg", "jpeg": mime = "image/jpeg"
            case "png": mime = "image/png"
            default: continue
            }
            let rank = nameRank * 2 + (mime == "image/jpeg" ? 0 : 1)
            if best.map({ rank < $0.rank }) ?? true { best = (rank, name, mime) }
        }
        guard let best else { return nil }
        let file = directory + "/" + best.name
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file),
              let size = attributes[.size] as? Int, size > 0, size <= maximumBytes,
              let data = FileManager.default.contents(atPath: file) else { return nil }
        return Artwork(bytes: [UInt8](data), mimeType: best.mime, source: file)
    }
}
