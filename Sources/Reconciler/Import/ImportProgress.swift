package import Foundation
package import ReconcilerDomain

/// How far an import is, for the progress line (rows done of total, rate, time left).
package final class ImportProgress: Sendable {
    package struct Snapshot: Sendable, Hashable {
        package var rowsDone = 0
        package var rowsTotal = 0
        package var startedAt: Date?

        /// "rows 1,200/100,000, 38.0 rows/s, 43m left"
        package func line(now: Date = Date()) -> String {
            var text = "import: rows \(rowsDone)/\(rowsTotal)"
            if let startedAt, rowsDone > 0 {
                let elapsed = max(now.timeIntervalSince(startedAt), 0.001)
                let rate = Double(rowsDone) / elapsed
                text += String(format: ", %.1f rows/s", rate)
                let left = Double(max(rowsTotal - rowsDone, 0)) / max(rate, 0.001)
                text +=
                    ", "
                    + (left >= 3600
                        ? "\(Int(left / 3600))h\(Int(left.truncatingRemainder(dividingBy: 3600) / 60))m"
                        : left >= 60 ? "\(Int(left / 60))m" : "\(Int(left))s") + " left"
            }
            return text
        }
    }

    private let state = Locked(Snapshot())

    package init() {}

    package var snapshot: Snapshot { state.withLock { $0 } }

    func start(total: Int) {
        state.withLock {
            $0.rowsTotal = total
            $0.startedAt = Date()
        }
    }

    func rowDone() { state.withLock { $0.rowsDone += 1 } }
}
