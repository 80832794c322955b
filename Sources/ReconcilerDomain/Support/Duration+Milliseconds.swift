extension Duration {
    /// Whole milliseconds (what PostgreSQL intervals and the command line's durations are given in).
    package var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
