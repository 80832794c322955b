extension Sequence {
    /// `map` with an async transform, one element at a time, in order.
    package func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }

    /// `allSatisfy` with an async predicate, one element at a time, stopping at the first that fails.
    package func asyncAllSatisfy(_ predicate: (Element) async throws -> Bool) async rethrows -> Bool {
        for element in self where try await !predicate(element) { return false }
        return true
    }
}
