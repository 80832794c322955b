import ReconcilerStore

extension ForwardQueue {
    /// The line `forward` and `status` print under the queue's counts for the failed deliveries
    /// whose stored payload cannot be rebuilt (``ForwardQueue/unrebuildablePayload``): they were
    /// never sent, and fixing the app's endpoint does not send them.
    static func unrebuildableLine(_ count: Int) -> String? {
        guard count > 0 else { return nil }
        let (subject, verb) = count == 1 ? ("its stored signed payload", "was") : ("their stored signed payloads", "were")
        return "  \(count) failed: \(subject) cannot be rebuilt, so \(count == 1 ? "it" : "they") \(verb) never sent "
            + "(`reconciler verify-stored` lists what is missing; runbook: \"A delivery that cannot be rebuilt\")"
    }
}
