import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Caps glibc's malloc arenas at the machine's cores (two at least) before the command starts its
/// threads, unless `MALLOC_ARENA_MAX` is set (glibc reads it itself).
///
/// Why: glibc gives a new thread an arena of its own, up to eight per core, and Dispatch's worker
/// threads come and go over a long command. Each new arena's blocks stayed resident: a 100k-row
/// import's RSS went from 85 to 95 MB as its threads went from 6 to 9, and at 20k rows without
/// Apple's limits `MALLOC_ARENA_MAX=2` took 14 MB off the peak.
enum MallocArenas {
    /// `M_ARENA_MAX` of glibc's `<malloc.h>`, which the Glibc module does not import.
    static let arenaMaxOption: Int32 = -8

    static func limit() {
        #if canImport(Glibc)
        guard Env.value("MALLOC_ARENA_MAX") == nil,
            // RTLD_DEFAULT: `mallopt` as glibc exports it, called with C's convention.
            let symbol = dlsym(nil, "mallopt")
        else { return }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        _ = mallopt(arenaMaxOption, Int32(max(2, ProcessInfo.processInfo.activeProcessorCount)))
        #endif
    }
}
