#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One direction's one-way measurements, `(local time, measured delay)`, and the
/// line under them that `ClockEstimator` fits: along their lower convex hull's chord from a
/// quarter of the span before their mean time to a quarter after it (within the span's middle
/// three quarters), moved down under every point.
///
/// Keeps its arrays between fits, so a refit over a
/// two-minute window allocates nothing but a block's few hull vertices. Not thread-safe.
///
/// Points are numbered from the first ever added; the points of each whole block of
/// `blockSize` numbers never change, so the lower hull of each block is found once and kept: a
/// point above its own block's hull is above the window's too. A refit's hull then runs over
/// the blocks' vertices and the points of the two partial blocks at the window's ends, a
/// tenth of the points.
struct LowerEnvelope {
    static let blockSize = 64
    private var x: [Double] = []
    private var y: [Double] = []
    /// The number of the point at `x[0]`.
    private var firstNumber = 0
    /// The lower hull's vertices of consecutive whole blocks, by point number, oldest first.
    private var blockHulls: [(block: Int, vertices: [Int])] = []
    /// Indices of the points the window's hull is built from, in time order.
    private var candidates: [Int] = []
    /// Indices of the lower hull's points, in time order (a stack as long as the points).
    private var hull: [Int] = []
    /// Blocks whose hulls are found again at the next fit: a route change's shift starts inside
    /// them (`ClockEstimator`), so their points no longer move as one.
    private var staleBlocks: [Int] = []
    /// Heights of the points above a line; reordered by `smallest(_:)`.
    private var heights: [Double] = []

    var count: Int { x.count }

    /// Starts a new window whose first point, the next appended, has number `firstNumber`.
    /// Numbers only grow from window to window.
    mutating func startWindow(firstNumber: Int) {
        self.firstNumber = firstNumber
        x.removeAll(keepingCapacity: true)
        y.removeAll(keepingCapacity: true)
    }

    /// Adds a point. The way out's come in time order, the way back's nearly (see `sortByTime`).
    mutating func append(x: Double, y: Double) {
        self.x.append(x)
        self.y.append(y)
    }

    /// A fitted line, and how far above it the points nearest it reach.
    struct Fit {
        var slope: Double
        var intercept: Double
        /// How far the lowest 5 % of the points reach above their own mean height over the line.
        var slack: Double
    }

    /// A line under all points along their lower convex hull: its chord across the middle half
    /// of the span (`hullChord`), moved down to touch the lowest point. Given a `slope` (a rate
    /// already known), the line of that slope through the lowest point instead. Needs at least
    /// one point.
    ///
    /// The line is not raised towards the points above it: it was, by the mean height of the
    /// lowest 5 %, to steady it as its touching points come and go, but that height is the
    /// jitter's shape, and the two ways' shapes differ wherever their jitter does (one busy
    /// way, a timer grid seen at other phases). In the simulated house (10 seeds, 10 s of
    /// history) it cost asymmetric jitter a worst true error of 830 µs (1.2 µs without it),
    /// Pareto 456 µs (0.9), and every other model as much or more than without.
    mutating func fit(slope known: Double? = nil) -> Fit {
        precondition(!x.isEmpty, "LowerEnvelope.fit needs a point")
        let (slope, intercept) = known == nil && x.count >= 2 ? hullChord() : (known ?? 0, lowestIntercept(slope: known ?? 0))
        // The slack: how far the lowest 5 % (at least 8) reach above their own mean height, so
        // how unevenly the points near the line lie (a clean path's are within a few µs).
        fillHeights(above: (slope, intercept))
        let count = heights.count
        let nearCount = min(count, max(8, count / 20))
        let slackRank = min(count, count / 20 + 1)
        let rank = max(nearCount, slackRank)
        smallest(rank)
        // Sorted, so the mean is summed in ascending order whatever order selection left.
        heights[0..<rank].sort()
        var nearMean = 0.0
        for height in heights[0..<nearCount] { nearMean += height }
        nearMean /= Double(nearCount)
        // Measured from that mean, so from a point at least as high as the ones averaged: with
        // few points (fewer than 160, the first seconds) the 5 % rank lies below their mean.
        return Fit(slope: slope, intercept: intercept, slack: heights[rank - 1] - nearMean)
    }

    /// The intercept of the line of `slope` under every point, touching the lowest.
    private func lowestIntercept(slope: Double) -> Double {
        var lowest = Double.infinity
        for index in x.indices { lowest = min(lowest, y[index] - slope * x[index]) }
        return lowest
    }

    /// The lower convex hull's chord across the middle half of the span, around the points'
    /// mean time kept out of the span's first and last eighth (between the hull's vertices
    /// that bracket it), moved down to touch the lowest point. Flat where the hull is a point
    /// or vertical.
    private mutating func hullChord() -> (slope: Double, intercept: Double) {
        collectCandidates()
        if hull.count < candidates.count { hull = [Int](repeating: 0, count: x.capacity) }
        let hullCount = candidates.withUnsafeBufferPointer { Self.lowerHull(of: $0, x: x, y: y, into: &hull) }
        var sumX = 0.0
        for value in x { sumX += value }
        let meanX = sumX / Double(x.count)
        guard hullCount >= 2 else { return (0, y[hull[0]]) }
        // The chord of the hull from a quarter of the span before the mean time to a quarter
        // after it, rather than the one edge across the mean: on a clean path the floor's
        // points differ by a microsecond or two, and an edge between two points a second apart
        // then tilts by a ppm or two, which carried over tens of seconds put real rooms 30-40 µs
        // off while their estimates agreed with one another. Neither end is taken from the
        // span's first or last eighth: exchanges come 25 times as fast while an estimate is
        // young, so the mean time sits near the start of its history, and a quarter before it
        // reached the first few exchanges, too few to have found the floor (under Pareto
        // jitter a refit there tilted by 24 ppm and moved a room 0.5 ms, and back 250 ms later).
        let quarter = (x[hull[hullCount - 1]] - x[hull[0]]) / 4
        // The ends are the vertices that bracket `from` and `to`, found from the hull's start:
        // found from the edge across the mean, as they once were, a mean inside the first
        // eighth (a young estimate's) took the start from before `from` all the same.
        let from = max(meanX - quarter, x[hull[0]] + quarter / 2), to = min(meanX + quarter, x[hull[hullCount - 1]] - quarter / 2)
        var first = 0
        while first < hullCount - 2 && x[hull[first + 1]] <= from { first += 1 }
        var last = first + 1
        while last < hullCount - 1 && x[hull[last]] < to { last += 1 }
        let a = hull[first], b = hull[last]
        guard x[b] > x[a] else { return (0, min(y[a], y[b])) }
        let slope = (y[b] - y[a]) / (x[b] - x[a])
        // The chord lies above the hull between its ends: the line goes under the lowest point.
        return (slope, lowestIntercept(slope: slope))
    }

    /// Fills `candidates`: every point of the partial blocks at the window's ends, and the
    /// hull vertices of the whole blocks between them (found now if not yet known).
    private mutating func collectCandidates() {
        let size = Self.blockSize
        let endNumber = firstNumber + x.count
        let firstBlock = (firstNumber + size - 1) / size
        let endBlock = endNumber / size
        candidates.removeAll(keepingCapacity: true)
        guard firstBlock < endBlock else {
            candidates.append(contentsOf: x.indices)
            sortByTime(&candidates)
            staleBlocks.removeAll(keepingCapacity: true)
            return
        }
        while let oldest = blockHulls.first, oldest.block < firstBlock { blockHulls.removeFirst() }
        if let oldest = blockHulls.first, oldest.block != firstBlock { blockHulls.removeAll() }
        candidates.append(contentsOf: 0..<(firstBlock * size - firstNumber))
        for block in firstBlock..<endBlock {
            let slot = block - firstBlock
            if slot == blockHulls.count || staleBlocks.contains(block) {
                let start = block * size - firstNumber
                var points = Array(start..<(start + size))
                sortByTime(&points)
                var vertices = [Int](repeating: 0, count: size)
                let count = points.withUnsafeBufferPointer { Self.lowerHull(of: $0, x: x, y: y, into: &vertices) }
                let hull = (block, vertices.prefix(count).map { $0 + firstNumber })
                if slot == blockHulls.count { blockHulls.append(hull) } else { blockHulls[slot] = hull }
            }
            for number in blockHulls[slot].vertices { candidates.append(number - firstNumber) }
        }
        candidates.append(contentsOf: (endBlock * size - firstNumber)..<x.count)
        sortByTime(&candidates)
        staleBlocks.removeAll(keepingCapacity: true)
    }

    /// Sorts point indices by time (then height), as the hull needs them. The way out's points
    /// come in time order; the way back's are in the order their requests left, and a reply
    /// that a later one overtook comes back after it (`ClockEstimator.add`), so a few are
    /// out of place by a few milliseconds.
    private func sortByTime(_ indices: inout [Int]) {
        var sorted = true
        for position in indices.indices.dropFirst() where x[indices[position - 1]] > x[indices[position]] {
            sorted = false
            break
        }
        if sorted { return }
        indices.sort { x[$0] != x[$1] ? x[$0] < x[$1] : y[$0] < y[$1] }
    }

    /// Has the hull of the block holding point `number` found again at the next fit: the
    /// points from it on are moved by another amount than those before it.
    mutating func refreshBlock(holding number: Int) {
        staleBlocks.append(number / Self.blockSize)
    }

    /// Forgets the hulls of the blocks from the one holding point `number` on: a point was
    /// put in before later ones, and their numbers moved up by one.
    mutating func invalidate(fromNumber number: Int) {
        let block = number / Self.blockSize
        while let newest = blockHulls.last, newest.block >= block { blockHulls.removeLast() }
    }

    /// Andrew's monotone chain, lower half: the indices of `points` (in time order) that are
    /// vertices of their lower convex hull, into `hull`'s first elements; returns how many.
    private static func lowerHull(of points: UnsafeBufferPointer<Int>, x: [Double], y: [Double], into hull: inout [Int]) -> Int {
        x.withUnsafeBufferPointer { x in
            y.withUnsafeBufferPointer { y in
                hull.withUnsafeMutableBufferPointer { hull in
                    var top = 0
                    for p in points {
                        while top >= 2 {
                            let a = hull[top - 2], b = hull[top - 1]
                            // Drop b if it lies on or above the segment a → p.
                            if (x[b] - x[a]) * (y[p] - y[a]) - (y[b] - y[a]) * (x[p] - x[a]) <= 0 { top -= 1 } else { break }
                        }
                        hull[top] = p
                        top += 1
                    }
                    return top
                }
            }
        }
    }

    private mutating func fillHeights(above line: (slope: Double, intercept: Double)) {
        heights.removeAll(keepingCapacity: true)
        for index in x.indices { heights.append(y[index] - (line.intercept + line.slope * x[index])) }
    }

    /// Reorders `heights` so that its first `count` elements are its `count` smallest and the
    /// last of them is the `count`-th smallest: Floyd and Rivest's selection, which first
    /// selects within a small sample to pick pivots that bracket the target, so a pass over all
    /// the points is made about once (expected n + min(k, n − k) comparisons).
    private mutating func smallest(_ count: Int) {
        guard count > 0, count < heights.count else { return }
        heights.withUnsafeMutableBufferPointer { values in
            Self.select(values, left: 0, right: values.count - 1, rank: count - 1)
        }
    }

    private static func select(_ values: UnsafeMutableBufferPointer<Double>, left: Int, right: Int, rank: Int) {
        var left = left, right = right
        while right > left {
            if right - left > 600 {
                let n = Double(right - left + 1)
                let i = Double(rank - left + 1)
                let z = log(n)
                let s = 0.5 * exp(2 * z / 3)
                let sd = 0.5 * (z * s * (n - s) / n).squareRoot() * (i - n / 2 < 0 ? -1 : 1)
                let sampleLeft = max(left, Int(Double(rank) - i * s / n + sd))
                let sampleRight = min(right, Int(Double(rank) + (n - i) * s / n + sd))
                select(values, left: sampleLeft, right: sampleRight, rank: rank)
            }
            let pivot = values[rank]
            var i = left, j = right
            values.swapAt(left, rank)
            if values[right] > pivot { values.swapAt(right, left) }
            while i < j {
                values.swapAt(i, j)
                i += 1
                j -= 1
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
            }
            if values[left] == pivot {
                values.swapAt(left, j)
            } else {
                j += 1
                values.swapAt(j, right)
            }
            if j <= rank { left = j + 1 }
            if rank <= j { right = j - 1 }
        }
    }
}
