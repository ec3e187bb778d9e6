import NIOCore

/// A weak reference to an object confined to an event loop, that a `Sendable` closure may
/// carry to that loop (from a producer thread, say) and look at there. Made on the loop; read
/// on the loop. Weak, so that what the object owns (its stream's producer, whose callback
/// carries this) does not keep it alive.
struct LoopBoundWeak<Object: AnyObject>: Sendable {
    private final class Box {
        weak var object: Object?
        init(_ object: Object) { self.object = object }
    }

    private let box: NIOLoopBound<Box>

    /// On `loop`.
    init(_ object: Object, loop: any EventLoop) {
        box = NIOLoopBound(Box(object), eventLoop: loop)
    }

    /// The object, if it is still there. On the loop.
    var object: Object? { box.value.object }
}
