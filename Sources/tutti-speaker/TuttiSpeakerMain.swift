import TuttiCommandLine

/// A room, light enough for a small computer: only the playout, the wire, the sound card and
/// discovery are linked (docs/EFFICIENCY.md). `tutti speaker` runs this.
@main
enum TuttiSpeakerMain {
    static func main() async {
        await SpeakerCommand.main()
    }
}
