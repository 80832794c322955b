import AppStoreServer
import Foundation
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler

/// What the store decides about a purchase that Apple's data leaves open: how long a non-renewing
/// subscription entitles, which of a snapshot and a notification wins, and when a customer is due.
@Suite struct PurchaseStateRulesTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    // MARK: Non-renewing subscriptions

    /// Apple sends no expiry for a non-renewing subscription: with the app's term it entitles for
    /// that long from its purchase, without one `entitled` is unknown, never "for ever"; a product
    /// type that is missing or unknown never entitles.
    @Test func entitlementOfProductsWithoutAnExpiry() {
        let now: Int64 = 1_800_000_000_000
        let day: Int64 = 86_400_000
        let policy = EntitlementPolicy(nonRenewingTerms: ["com.example.pass.30d": 30 * day])
        func pass(bought: Int64, product: String = "com.example.pass.30d") -> Entitlement.Facts {
            .init(productType: "Non-Renewing Subscription", productId: product, purchaseDate: bought)
        }
        #expect(Entitlement.isEntitled(pass(bought: now - 14 * 30 * day), at: Timestamp(millisecondsSince1970: now), policy: policy) == false)
        #expect(Entitlement.isEntitled(pass(bought: now - 10 * day), at: Timestamp(millisecondsSince1970: now), policy: policy) == true)
        #expect(
            Entitlement.isEntitled(
                pass(bought: now - 10 * day, product: "com.example.pass.other"), at: Timestamp(millisecondsSince1970: now), policy: policy) == nil)
        #expect(Entitlement.isEntitled(pass(bought: now - 10 * day), at: Timestamp(millisecondsSince1970: now)) == nil)
        #expect(Entitlement.isEntitled(.init(productType: nil, purchaseDate: now - day), at: Timestamp(millisecondsSince1970: now)) == false)
        #expect(
            Entitlement.isEntitled(.init(productType: "Future Product Type", purchaseDate: now - day), at: Timestamp(millisecondsSince1970: now))
                == false)
        #expect(
            Entitlement.isEntitled(.init(productType: "Non-Consumable", purchaseDate: now - 400 * day), at: Timestamp(millisecondsSince1970: now))
                == true)
        #expect(
            EntitlementPolicy.parseTerms("com.example.pass.30d=30d, com.example.pass.8h=8h") == [
                "com.example.pass.30d": 30 * day, "com.example.pass.8h": 8 * 3_600_000,
            ])
        #expect(EntitlementPolicy.parseTerms("com.example.pass.30d") == nil)
        #expect(EntitlementPolicy.formatTerms(["b": 8 * 3_600_000, "a": 30 * day]) == "a=30d,b=8h")
    }

}
