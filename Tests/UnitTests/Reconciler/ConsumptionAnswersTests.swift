import AppStoreServer
import ReconcilerDomain
import Testing

@testable import Reconciler

/// Apple's rules for an answer to a consumption request (Send Consumption Information V2), checked
/// before any request: each refusal names its rule and has its code; what Apple accepts passes.
@Suite struct ConsumptionAnswersTests {
    func input(
        consented: Bool = true, transactionId: String = "2000000100000317", delivery: String = "DELIVERED", sample: String = "false",
        preference: String? = nil, percentage: Int? = nil
    ) -> ConsumptionAnswers.Input {
        ConsumptionAnswers.Input(
            transactionId: transactionId, customerConsented: consented, deliveryStatus: delivery, sampleContentProvided: sample,
            refundPreference: preference, consumptionPercentage: percentage)
    }

    func refusal(_ input: ConsumptionAnswers.Input) -> ReconcilerError? {
        do {
            _ = try ConsumptionAnswers.body(of: input)
            return nil
        } catch {
            return error as? ReconcilerError
        }
    }

    @Test func anAnswerApplesRulesAcceptIsTheBodyApplesModelSends() throws {
        let body = try ConsumptionAnswers.body(of: input(delivery: "delivered", sample: "TRUE", preference: "grant_prorated", percentage: 25_000))
        #expect(
            body
                == ConsumptionRequest(
                    customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true, consumptionPercentage: 25_000,
                    refundPreference: .grantProrated))
        let minimal = try ConsumptionAnswers.body(of: input(delivery: "UNDELIVERED_SERVER_OUTAGE", percentage: 0))
        #expect(minimal.deliveryStatus == .undeliveredServerOutage && minimal.consumptionPercentage == 0 && minimal.refundPreference == nil)
    }

    @Test func withoutTheCustomersConsentThereIsNoAnswer() {
        let error = refusal(input(consented: false))
        #expect(error?.code == .invalidAnswer)
        #expect(error?.description.contains("4000035") == true)
    }

    @Test(arguments: [
        ("DELIVERED", "maybe", nil as String?, nil as Int?),  // not a Boolean
        ("SHIPPED", "false", nil, nil),  // not one of Apple's delivery statuses
        ("DELIVERED", "false", "REFUND_ALL", nil),  // not one of Apple's refund preferences
        ("DELIVERED", "false", nil, 100_001),  // above 100% in milliunits
        ("DELIVERED", "false", nil, -1),
        ("UNDELIVERED_QUALITY_ISSUE", "false", nil, 10_000),  // not delivered: the percentage must be 0
    ])
    func fieldsOutsideApplesRulesAreRefused(delivery: String, sample: String, preference: String?, percentage: Int?) {
        #expect(refusal(input(delivery: delivery, sample: sample, preference: preference, percentage: percentage))?.code == .invalidAnswer)
    }

    @Test(arguments: ["", "abc", "2000-0001", "２０００"])
    func aTransactionIdIsDigits(_ transactionId: String) {
        #expect(refusal(input(transactionId: transactionId))?.code == .invalidAnswer)
    }

    /// The rules that depend on the purchase, from its stored transaction.
    @Test func theProductTypeAndOwnershipDecideThePercentage() throws {
        func check(_ body: ConsumptionRequest, _ type: ProductType?, _ ownership: InAppOwnershipType? = .purchased) -> ReconcilerError.Code? {
            do {
                try ConsumptionAnswers.check(body, productType: type, ownership: ownership)
                return nil
            } catch {
                return (error as? ReconcilerError)?.code
            }
        }
        let withPercentage = try ConsumptionAnswers.body(of: input(percentage: 40_000))
        let without = try ConsumptionAnswers.body(of: input())
        let prorated = try ConsumptionAnswers.body(of: input(preference: "GRANT_PRORATED"))
        let proratedAll = try ConsumptionAnswers.body(of: input(preference: "GRANT_PRORATED", percentage: 100_000))
        let proratedPart = try ConsumptionAnswers.body(of: input(preference: "GRANT_PRORATED", percentage: 40_000))
        // Apple computes an auto-renewable subscription's share (4000209).
        #expect(check(withPercentage, .autoRenewableSubscription) == .invalidAnswer)
        #expect(check(without, .autoRenewableSubscription) == nil)
        #expect(check(prorated, .autoRenewableSubscription) == nil)
        // GRANT_PRORATED for the other types needs a share above 0 and below all of it.
        for type in [ProductType.consumable, .nonConsumable, .nonRenewingSubscription] {
            #expect(check(prorated, type) == .invalidAnswer, "\(type)")
            #expect(check(proratedAll, type) == .invalidAnswer, "\(type)")
            #expect(check(proratedPart, type) == nil, "\(type)")
            #expect(check(withPercentage, type) == nil, "\(type)")
        }
        // No answer for a Family Sharing transaction (4000185); unknown facts are Apple's to judge.
        #expect(check(without, .consumable, .familyShared) == .invalidAnswer)
        #expect(check(withPercentage, nil, nil) == nil)
    }
}
