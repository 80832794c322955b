package import AppStoreServer
package import ReconcilerShared

/// One app in one environment together with the app's entitlement rule: what every writer of
/// purchase state needs, so that `entitled` in the change feed is judged by the app's own choices
/// (billing retry, sandbox purchases, non-renewing terms) whichever command wrote the row.
///
/// A scope comes with the app's configuration (the file's `apps` entry, or the `APP_STORE_*` and
/// `RECONCILER_*` variables for one app) and is passed down from the command to the store, never
/// rebuilt on the way: a writer that cannot be given one cannot be built.
///
/// ```swift
/// let scope = AppScope(target: AppTarget(bundleId: "com.example.one", environment: .sandbox), entitlement: .init(sandboxEntitles: false))
/// let handler = NotificationHandler(scope: scope, verifier: verifier, database: database)
/// ```
package struct AppScope: Sendable, Hashable, CustomStringConvertible {
    /// The app and environment whose rows are written and read.
    package let target: AppTarget
    /// The app's rule for `entitled`.
    package let entitlement: EntitlementPolicy

    package init(target: AppTarget, entitlement: EntitlementPolicy) {
        self.target = target
        self.entitlement = entitlement
    }

    package var bundleId: String { target.bundleId }
    package var environment: AppStoreEnvironment { target.environment }
    package var description: String { target.description }
}
