package import Foundation
import ReconcilerDomain

/// Where an import file's bytes come from, a chunk at a time, so the reader's memory does not
/// grow with the file.
package struct ImportByteSource: Sendable {
    /// The next chunk, or `nil` at the end.
    let read: @Sendable () throws -> [UInt8]?

    package init(read: @escaping @Sendable () throws -> [UInt8]?) {
        self.read = read
    }

    /// A file, read 64 KiB at a time.
    package static func file(_ handle: FileHandle) -> ImportByteSource {
        ImportByteSource {
            guard let data = try handle.read(upToCount: 65_536), !data.isEmpty else { return nil }
            return [UInt8](data)
        }
    }

    /// Bytes in memory, given `chunkSize` at a time (tests cut records across chunks).
    package static func bytes(_ bytes: [UInt8], chunkSize: Int = 65_536) -> ImportByteSource {
        let offset = Locked(0)
        return ImportByteSource {
            offset.withLock { offset in
                guard offset < bytes.count else { return nil }
                let end = min(offset + max(chunkSize, 1), bytes.count)
                defer { offset = end }
                return Array(bytes[offset..<end])
            }
        }
    }
}
