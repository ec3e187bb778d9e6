import Hummingbird
import NIOCore
import TuttiHouse
import TuttiMedia
import TuttiProtocol

/// `GET /api/artwork?path=…`: a track's cover art as an image, for the web UI's now playing
/// and library and for any controller. The one route that is not a `ControlCommand`: its reply
/// is bytes, not a report. `placeholder=true` answers a track without artwork with a neutral
/// picture instead of a 404, as Lyrion does, so that an `<img>` never shows a broken image.
enum ArtworkRoute {
    static let path = "/api/artwork"

    /// Every image type `Artwork` serves, and the placeholder's.
    static let mimeTypes = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp", "image/svg+xml"]

    static func answer(_ request: Request, house: House) async -> Response {
        if let group = request.uri.queryParameters.get("live") {
            // A live source's cover (`LiveSourceReport.artworkRevision`): the type it was sent
            // as, if it is an image type this route serves.
            switch await house.liveArtwork(group: group) {
            case .success(let artwork) where mimeTypes.contains(artwork.mimeType):
                return Response(status: .ok, headers: [.contentType: artwork.mimeType, .cacheControl: "no-cache"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: artwork.bytes)))
            case .success(let artwork):
                return HouseAPIRoutes.refusal(ControlRefusal("artwork: the source's cover is \(artwork.mimeType), not an image type served", kind: .notFound))
            case .failure(let refused):
                return HouseAPIRoutes.refusal(refused)
            }
        }
        guard let path = request.uri.queryParameters.get("path"), !path.isEmpty else {
            return HouseAPIRoutes.refusal(ControlRefusal("artwork: give the track's path: /api/artwork?path=/music/a.flac"))
        }
        let placeholderText = request.uri.queryParameters.get("placeholder") ?? "false"
        guard let placeholder = ["true": true, "1": true, "false": false, "0": false][placeholderText] else {
            return HouseAPIRoutes.refusal(ControlRefusal("artwork: \"placeholder\" must be true or false, not \(placeholderText)"))
        }
        switch await house.artwork(forTrack: path) {
        case .success(let artwork):
            return Response(status: .ok, headers: [.contentType: artwork.mimeType, .cacheControl: "max-age=300"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: artwork.bytes)))
        case .failure(let refused) where refused.kind == .notFound && placeholder:
            return Response(status: .ok, headers: [.contentType: "image/svg+xml", .cacheControl: "max-age=300"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: placeholderSVG)))
        case .failure(let refused):
            return HouseAPIRoutes.refusal(refused)
        }
    }

    /// A quaver on a neutral square.
    static let placeholderSVG = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><rect width="100" height="100" fill="#2a2f3a"/>\
        <path d="M58 22v40.5a12 12 0 1 1-6-10.4V32l-14 4v32.5a12 12 0 1 1-6-10.4V31l26-9z" fill="#8a93a6"/></svg>
        """

    /// Its entry in `/openapi.json`.
    static var openAPI: [String: Any] {
        var responses: [String: Any] = [
            "200": ["description": "The picture: embedded in the file, or an image beside it (cover.jpg, folder.jpg …); the placeholder if asked for and there is none.",
                    "content": Dictionary(uniqueKeysWithValues: mimeTypes.map { ($0, ["schema": ["type": "string", "contentMediaType": $0]] as [String: Any]) })],
        ]
        let refusals: [(ControlRefusal.Kind, String)] = [
            (.invalid, "No path, a relative one, a URL, or a placeholder that is not true or false."),
            (.forbidden, "A file outside the directories the house plays from."),
            (.notFound, "No such file, or no artwork in it or beside it; with `live`, no such group, no live source, or no cover sent."),
            (.unplayable, "A file that is not media."),
        ]
        for (kind, summary) in refusals {
            responses["\(HouseAPIRoutes.status(for: kind).code)"] = ["description": summary,
                                                                     "content": ["application/json": ["schema": JSONSchema.reference("Refusal").json]]]
        }
        return ["get": [
            "summary": "A track's cover art, as an image.",
            "operationId": "artwork",
            "parameters": [
                ["name": "path", "in": "query", "required": false, "description": "The track's path on the house's disk (without `live`).", "schema": ["type": "string"]],
                ["name": "live", "in": "query", "required": false,
                 "description": "Instead of a track: the cover a group's live source (an AirPlay sender) sent; the group's name or id. A status's `source.artworkRevision` says there is one.",
                 "schema": ["type": "string"]],
                ["name": "placeholder", "in": "query", "required": false, "description": "Answer a track without artwork with a neutral picture instead of 404.",
                 "schema": ["type": "boolean"]],
            ],
            "responses": responses,
        ] as [String: Any]]
    }
}
