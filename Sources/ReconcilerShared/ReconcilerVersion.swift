/// The version every executable of the package prints (`reconciler --version`,
/// `mock-appstore --version`) and the container image is labelled with.
///
/// It is set in one place, here, for a release: the release commit changes ``current`` (semantic
/// versioning: a new major for a change the deploy notes must call out, such as a migration an
/// older binary cannot serve beside), and the tag and the image's `VERSION` build argument take
/// the same value (`docker build --build-arg VERSION=$(reconciler --version)`).
package enum ReconcilerVersion {
    package static let current = "1.0.0"
}
