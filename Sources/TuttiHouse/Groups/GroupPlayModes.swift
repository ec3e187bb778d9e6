import NIOCore
import TuttiCore
import TuttiEngine
import TuttiProtocol

/// The play modes (`PlayModes`) as the house carries them out. The engine knows none of them:
/// it is given the queue in play order and a pass count.
/// - `repeat` is the engine's pass count: nil (forever) instead of 1.
/// - `random` is the order the engine is given: `randomOrder`, a shuffle of the
///   queue's tags kept across edits (a new item goes to a random place after the one heard).
/// - `single` gives the engine the item heard alone (`singleTag`), so production ends after it,
///   or loops it with `repeat`.
/// - `consume` removes an item once the playhead has left it (`consumeHeard`, every 200 ms).
/// A mode changed while playing is an edit like any other: the stream is cut where what is
/// heard next changes, beyond the edit horizon, and not at all where it does not.
///
/// Thread-safety: on the house's loop, like all of `GroupSession`.
extension GroupSession {
    /// How many times the engine plays the queue it is given.
    var enginePasses: Int? { playModes.repeat ? nil : 1 }

    /// The queue's tags in the order they play.
    var playOrderTags: [Int] {
        playModes.random ? randomOrder : tags
    }

    /// The queue as the engine plays it: in play order, or the single item.
    var queueEntries: [QueueProducer.Entry] {
        let paths = Dictionary(uniqueKeysWithValues: zip(tags, queue))
        var tags = playOrderTags
        if playModes.single, let singleTag { tags = tags.filter { $0 == singleTag } }
        return tags.compactMap { tag in paths[tag].map { queueEntry(path: $0, tag: tag) } }
    }

    /// The queue index that plays after `index` in play order (with `repeat`, the first after
    /// the last); `single` is not taken into account.
    func itemAfter(_ index: Int) -> Int? {
        let order = playOrderTags
        guard tags.indices.contains(index), let position = order.firstIndex(of: tags[index]) else { return nil }
        if position + 1 < order.count { return tags.firstIndex(of: order[position + 1]) }
        return playModes.repeat ? order.first.flatMap { tags.firstIndex(of: $0) } : nil
    }

    /// The queue index that plays before `index` in play order (none before the first).
    func itemBefore(_ index: Int) -> Int? {
        let order = playOrderTags
        guard tags.indices.contains(index), let position = order.firstIndex(of: tags[index]), position > 0 else { return nil }
        return tags.firstIndex(of: order[position - 1])
    }

    /// The first queue index in play order.
    var firstItemInPlayOrder: Int {
        playOrderTags.first.flatMap { tags.firstIndex(of: $0) } ?? 0
    }

    /// What plays after the item heard, as `status` reports it.
    func nextItem(after index: Int) -> Int? {
        guard playModes.single else { return itemAfter(index) }
        return playModes.repeat ? index : nil
    }

    /// The tag of the queue entry heard now, if it is still in the queue.
    var heardTag: Int? {
        guard let item = currentItem, item.index >= 0 else { return nil }
        return tags[item.index]
    }

    /// Keeps `randomOrder` a shuffle of the queue: removed tags leave it, new ones go to a
    /// random place after the item heard. Empty (random just turned on, or a new queue), it is
    /// made afresh with the item heard first. Called before every store of the state.
    func reconcileRandomOrder() {
        guard playModes.random else {
            randomOrder = []
            return
        }
        let present = Set(tags)
        var order = randomOrder.filter(present.contains)
        let known = Set(order)
        let added = tags.filter { !known.contains($0) }
        guard !added.isEmpty else {
            randomOrder = order
            return
        }
        let heard = heardTag
        if order.isEmpty {
            order = (heard.map { [$0] } ?? []) + added.filter { $0 != heard }.shuffled(using: &core.randomSource)
        } else {
            let after = heard.flatMap { order.firstIndex(of: $0) } ?? -1
            for tag in added { order.insert(tag, at: Int.random(in: (after + 1)...order.count, using: &core.randomSource)) }
        }
        randomOrder = order
    }

    /// `play-modes`: changes the modes given and brings the playing stream in line.
    func setPlayModes(repeat: Bool?, random: Bool?, single: Bool?, consume: Bool?) {
        var modes = playModes
        if let `repeat` { modes.repeat = `repeat` }
        if let random { modes.random = random }
        if let single { modes.single = single }
        if let consume { modes.consume = consume }
        guard modes != playModes else { return }
        if modes.random && !playModes.random { randomOrder = [] }
        if modes.single && !playModes.single { singleTag = heardTag ?? singleTag }
        log("\(self): play modes: " + [("repeat", modes.repeat), ("random", modes.random), ("single", modes.single), ("consume", modes.consume)]
            .map { "\($0.0) \($0.1 ? "on" : "off")" }.joined(separator: ", "))
        playModes = modes
        save()
        watchConsumption()
        engineFollowsQueue()
    }

    /// Hands `engine` the queue in play order and the pass count, as one edit: it cuts only
    /// what changes, and `completion` hears what it did.
    /// - Parameter soundChanged: the items' gains changed (replay gain settings): what is decoded
    ///   from the edit horizon is decoded again with them.
    func giveQueue(to engine: QueueProducer, soundChanged: Bool = false, completion: QueueProducer.EditCompletion?) {
        let entries = queueEntries
        engine.setPasses(enginePasses)
        engine.edit({ $0 = entries }, soundChanged: soundChanged, completion: completion)
    }

    /// The playing stream's engine takes the queue as it now is (no one awaits the answer).
    func engineFollowsQueue(soundChanged: Bool = false) {
        guard let engine = stream?.engine else { return }
        giveQueue(to: engine, soundChanged: soundChanged, completion: nil)
        productionMayProceed()
    }

    /// `queue-shuffle`: the item heard first, the others in a random order.
    func shuffleQueue() {
        let heard = heardTag
        var order = tags.filter { $0 != heard }.shuffled(using: &core.randomSource)
        if let heard { order.insert(heard, at: 0) }
        let paths = Dictionary(uniqueKeysWithValues: zip(tags, queue))
        tags = order
        queue = order.map { paths[$0]! }
    }

    /// Starts or stops the look for consumed items as `consume` is on or off.
    func watchConsumption() {
        consumeWatch?.cancel()
        consumeWatch = nil
        consumedUntil = nil
        guard playModes.consume else { return }
        let group = LoopBoundWeak(self, loop: loop)
        consumeWatch = loop.scheduleRepeatedTask(initialDelay: .milliseconds(200), delay: .milliseconds(200)) { _ in
            guard let group = group.object else { return }
            group.whileAttached { group.consumeHeard() }
        }
    }

    /// `consume`: removes from the queue every item whose end the playhead has passed since
    /// the last look, but the one heard (which `single` with `repeat` plays again).
    private func consumeHeard() {
        guard let stream, let engine = stream.engine else {
            consumedUntil = nil
            return
        }
        let head = playhead()
        let since = consumedUntil.flatMap { $0.stream == stream.id ? $0.frame : nil } ?? .min
        consumedUntil = (stream.id, head)
        let ended = stream.endFrame.map { head >= $0 } ?? false
        let heard = ended ? nil : heardTag
        let finished = engine.outcomes.filter { outcome in
            let end = outcome.startFrame + outcome.frameCount
            return outcome.info != nil && outcome.frameCount > 0 && end > since && end <= head && outcome.tag != heard
        }
        let indices = Set(finished.compactMap { tags.firstIndex(of: $0.tag) })
        guard !indices.isEmpty else { return }
        for index in indices.sorted(by: >) {
            queue.remove(at: index)
            tags.remove(at: index)
        }
        save()
        engineFollowsQueue()
        core.noteChange()
    }
}
