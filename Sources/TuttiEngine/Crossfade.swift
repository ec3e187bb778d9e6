import Foundation
import TuttiMedia

/// Crossfade between consecutive queue items (a group's `crossfade` setting, MPD's
/// `crossfade`): the last frames of one item overlap the first of the next, one fading out as
/// the other fades in on an equal-power curve, so the sum keeps the loudness of uncorrelated
/// music through the join. It is computed where the queue becomes one stream
/// (`GaplessQueueReader`), so every room of a group hears the same fade.
///
/// Consecutive tracks of one album in album order are never crossfaded: a live album or a DJ
/// mix stays gapless (`continuesAlbum`).
public enum Crossfade {
    /// Whether `next` is the track after `previous` on the same album (same title, same album
    /// artist — or artist, where no album artist is tagged — and the next track number or the
    /// next disc's first track): kept gapless.
    public static func continuesAlbum(_ previous: TrackInfo, _ next: TrackInfo) -> Bool {
        guard let album = previous.album, !album.isEmpty, next.album == album,
              let before = previous.albumPosition, let after = next.albumPosition,
              // Two artists' "Greatest Hits" are two albums.
              previous.albumArtist ?? previous.artist == next.albumArtist ?? next.artist else { return false }
        return after.follows(before)
    }

    /// The two gains at frame `index` of a crossfade `length` frames long: the item fading out
    /// goes as cos, the one fading in as sin of a quarter turn, sampled at frame centres so the
    /// curve is symmetric (out² + in² = 1 at every frame: equal power).
    @inline(__always)
    public static func gains(atFrame index: Int, of length: Int) -> (fadingOut: Float, fadingIn: Float) {
        let angle = (Double(index) + 0.5) / Double(length) * (Double.pi / 2)
        return (Float(cos(angle)), Float(sin(angle)))
    }
}
