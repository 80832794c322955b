import Crypto
import Foundation

/// SHA-256 as lowercase hex: how payloads are named in the quarantine and migrations are checksummed.
package enum SHA256Hex {
    package static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
