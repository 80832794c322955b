package import AppStoreServer
import Foundation

/// One Get Notification History filter: a type with a subtype, a type alone (which, by Apple's
/// rule, returns only notifications of that type without a subtype), or nothing (everything).
package struct NotificationFilter: Hashable, Sendable, Codable, CustomStringConvertible {
    package var notificationType: NotificationTypeV2?
    package var notificationSubtype: Subtype?

    package init(_ notificationType: NotificationTypeV2?, _ notificationSubtype: Subtype? = nil) {
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
    }

    /// The unfiltered sweep.
    package static let everything = NotificationFilter(nil)

    /// Parses `TYPE` or `TYPE/SUBTYPE`.
    package init?(parsing text: String) {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), !parts[0].isEmpty else { return nil }
        let type = NotificationTypeV2(rawValue: parts[0].uppercased())
        let subtype = parts.count == 2 ? Subtype(rawValue: parts[1].uppercased()) : nil
        guard type.isKnown, subtype?.isKnown ?? true else { return nil }
        self.init(type, subtype)
    }

    package var description: String {
        guard let notificationType else { return "(all types)" }
        return notificationSubtype.map { "\(notificationType.rawValue)/\($0.rawValue)" } ?? notificationType.rawValue
    }
}
