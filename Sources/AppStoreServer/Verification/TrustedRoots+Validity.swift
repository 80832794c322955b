public import Foundation
import X509

extension TrustedRoots {
    /// A trusted root's name and the end of its validity, for a check that warns before it ends.
    public struct Validity: Sendable, Hashable {
        public var subject: String
        public var notValidAfter: Date
    }

    /// The roots at `paths` (as ``load(paths:)`` reads them; `nil`: the bundled Apple Root CA - G3)
    /// and until when each is valid.
    public static func validity(paths: [String]?) throws -> [Validity] {
        let roots = try paths.map(load(paths:)) ?? [appleRootCAG3]
        return roots.map { Validity(subject: $0.subject.description, notValidAfter: $0.notValidAfter) }
    }
}
