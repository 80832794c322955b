package import AppStoreServer

/// How the reconciler answers consumption requests by itself (`consumption:` in the configuration
/// file, at the top level or per app): the answer's fields, per product where they differ, checked
/// against Apple's rules for Send Consumption Information when the file loads (``problems()``).
///
/// ```yaml
/// consumption:
///   customerConsented: true          # the app obtained the customers' consent (e.g. in its terms)
///   deliveryStatus: DELIVERED
///   sampleContentProvided: false
///   refundPreference: DECLINE
///   products:
///     com.example.coins.100: {refundPreference: GRANT_PRORATED, consumptionPercentage: 50000}
///   answerAfter: 2h                  # leave the app this long to answer first (automatic only)
///   automatic: true                  # each run (and serve's leader) answers what is due
/// ```
package struct ConsumptionPolicy: Sendable, Hashable {
    /// The fields of an answer; `nil`: not said here (a product's fall back to the defaults').
    package struct Fields: Sendable, Hashable {
        package var deliveryStatus: DeliveryStatus?
        package var sampleContentProvided: Bool?
        package var refundPreference: RefundPreference?
        /// Milliunits (100000 is all of it); only per product: Apple refuses one for an
        /// auto-renewable subscription.
        package var consumptionPercentage: Int?

        package init(
            deliveryStatus: DeliveryStatus? = nil, sampleContentProvided: Bool? = nil, refundPreference: RefundPreference? = nil,
            consumptionPercentage: Int? = nil
        ) {
            self.deliveryStatus = deliveryStatus
            self.sampleContentProvided = sampleContentProvided
            self.refundPreference = refundPreference
            self.consumptionPercentage = consumptionPercentage
        }

        /// These over `base`, field by field.
        package func over(_ base: Fields) -> Fields {
            Fields(
                deliveryStatus: deliveryStatus ?? base.deliveryStatus, sampleContentProvided: sampleContentProvided ?? base.sampleContentProvided,
                refundPreference: refundPreference ?? base.refundPreference,
                consumptionPercentage: consumptionPercentage ?? base.consumptionPercentage)
        }
    }

    /// The operator declares that the app obtained the customers' consent; without it nothing is
    /// sent by policy (Apple refuses an answer without consent, and asks that none be sent).
    package var customerConsented: Bool
    package var defaults: Fields
    /// By product ID, over the defaults.
    package var products: [String: Fields]
    /// How long after a request's first send attempt an automatic answer waits (the app may
    /// answer first, and ack). `consumption respond` does not wait.
    package var answerAfter: Duration
    /// Whether each run (and `serve`'s leader) answers the requests whose `answerAfter` passed.
    package var automatic: Bool

    package static let defaultAnswerAfter = Duration.seconds(2 * 3600)

    package init(
        customerConsented: Bool, defaults: Fields, products: [String: Fields] = [:], answerAfter: Duration = Self.defaultAnswerAfter,
        automatic: Bool = false
    ) {
        self.customerConsented = customerConsented
        self.defaults = defaults
        self.products = products
        self.answerAfter = answerAfter
        self.automatic = automatic
    }

    /// The fields for a purchase of `productId` (`nil`: unknown, the defaults).
    package func fields(forProduct productId: String?) -> Fields {
        productId.flatMap { products[$0] }?.over(defaults) ?? defaults
    }

    /// The answer for a purchase of `productId`, before the rules that depend on the purchase's type.
    package func body(forProduct productId: String?) -> ConsumptionRequest? {
        let fields = fields(forProduct: productId)
        guard customerConsented, let deliveryStatus = fields.deliveryStatus, let sample = fields.sampleContentProvided else { return nil }
        return ConsumptionRequest(
            customerConsented: true, deliveryStatus: deliveryStatus, sampleContentProvided: sample,
            consumptionPercentage: fields.consumptionPercentage.map(Int32.init), refundPreference: fields.refundPreference)
    }

    /// Where the policy breaks Apple's rules whatever the purchase: each problem as the key at
    /// fault (relative to the section: `deliveryStatus`, `products.X.consumptionPercentage`) and why.
    /// Rules that depend on the purchase's type (a percentage for a subscription, `GRANT_PRORATED`
    /// without one for a consumable, Family Sharing) are judged per request.
    package func problems() -> [(key: String, why: String)] {
        var problems: [(key: String, why: String)] = []
        if defaults.deliveryStatus == nil {
            problems.append(("deliveryStatus", "is required (Apple requires it in every answer): \(Self.known(DeliveryStatus.knownValues))"))
        }
        if defaults.sampleContentProvided == nil {
            problems.append(("sampleContentProvided", "is required (Apple requires it in every answer): true or false"))
        }
        if defaults.consumptionPercentage != nil {
            problems.append(
                (
                    "consumptionPercentage",
                    "is set per product only (under products): Apple refuses a percentage for an auto-renewable subscription (4000209)"
                ))
        }
        func check(_ fields: Fields, at prefix: String) {
            if let status = fields.deliveryStatus, !status.isKnown {
                problems.append(("\(prefix)deliveryStatus", "\(status.rawValue) is not one of Apple's: \(Self.known(DeliveryStatus.knownValues))"))
            }
            if let preference = fields.refundPreference, !preference.isKnown {
                problems.append(
                    ("\(prefix)refundPreference", "\(preference.rawValue) is not one of Apple's: \(Self.known(RefundPreference.knownValues))"))
            }
        }
        check(defaults, at: "")
        for productId in products.keys.sorted() {
            let key = "products.\(productId)."
            let written = products[productId]!
            check(written, at: key)
            let fields = written.over(defaults)
            guard let percentage = fields.consumptionPercentage else { continue }
            if !(0...100_000).contains(percentage) {
                problems.append(("\(key)consumptionPercentage", "\(percentage) is outside 0...100000 (milliunits: 100000 is all of it)"))
            } else if fields.deliveryStatus != .delivered, percentage != 0 {
                problems.append(
                    (
                        "\(key)consumptionPercentage",
                        "must be 0 when the delivery status is not DELIVERED (UndeliveredConsumptionPercentageNonZeroError)"
                    ))
            } else if fields.refundPreference == .grantProrated, !(1..<100_000).contains(percentage) {
                problems.append(
                    ("\(key)consumptionPercentage", "must be above 0 and below 100000 with GRANT_PRORATED (ConsumptionPercentageOutOfRangeError)"))
            }
        }
        return problems
    }

    private static func known<Value: RawRepresentable>(_ values: [Value]) -> String where Value.RawValue == String {
        values.map(\.rawValue).joined(separator: ", ")
    }
}
