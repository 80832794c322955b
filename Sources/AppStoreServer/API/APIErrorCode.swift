/// An App Store Server API `errorCode`; unknown codes keep their raw value.
public struct APIErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }

    public static let generalBadRequest = APIErrorCode(rawValue: 4000000)
    public static let invalidAppIdentifier = APIErrorCode(rawValue: 4000002)
    public static let invalidRequestRevision = APIErrorCode(rawValue: 4000005)
    public static let invalidTransactionId = APIErrorCode(rawValue: 4000006)
    public static let invalidOriginalTransactionId = APIErrorCode(rawValue: 4000008)
    public static let startDateTooFarInPast = APIErrorCode(rawValue: 4000012)
    public static let startDateAfterEndDate = APIErrorCode(rawValue: 4000013)
    public static let invalidPaginationToken = APIErrorCode(rawValue: 4000014)
    public static let invalidStartDate = APIErrorCode(rawValue: 4000015)
    public static let invalidEndDate = APIErrorCode(rawValue: 4000016)
    public static let paginationTokenExpired = APIErrorCode(rawValue: 4000017)
    public static let invalidNotificationType = APIErrorCode(rawValue: 4000018)
    public static let multipleFiltersSupplied = APIErrorCode(rawValue: 4000019)
    public static let invalidSort = APIErrorCode(rawValue: 4000021)
    public static let invalidProductType = APIErrorCode(rawValue: 4000022)
    public static let invalidProductId = APIErrorCode(rawValue: 4000023)
    public static let invalidSubscriptionGroupIdentifier = APIErrorCode(rawValue: 4000024)
    public static let invalidInAppOwnershipType = APIErrorCode(rawValue: 4000026)
    public static let invalidRevoked = APIErrorCode(rawValue: 4000030)
    public static let invalidStatus = APIErrorCode(rawValue: 4000031)
    public static let invalidCustomerConsented = APIErrorCode(rawValue: 4000035)
    public static let invalidDeliveryStatus = APIErrorCode(rawValue: 4000036)
    public static let invalidSampleContentProvided = APIErrorCode(rawValue: 4000041)
    public static let invalidRefundPreference = APIErrorCode(rawValue: 4000044)
    public static let appTransactionIdNotSupported = APIErrorCode(rawValue: 4000048)
    public static let invalidAppAccountTokenUUID = APIErrorCode(rawValue: 4000183)
    public static let familyTransactionNotSupported = APIErrorCode(rawValue: 4000185)
    public static let transactionIdIsNotOriginalTransactionId = APIErrorCode(rawValue: 4000187)
    public static let consumptionPercentageAutoRenewableSubscription = APIErrorCode(rawValue: 4000209)
    public static let accountNotFound = APIErrorCode(rawValue: 4040001)
    public static let accountNotFoundRetryable = APIErrorCode(rawValue: 4040002)
    public static let appNotFound = APIErrorCode(rawValue: 4040003)
    public static let appNotFoundRetryable = APIErrorCode(rawValue: 4040004)
    public static let originalTransactionIdNotFound = APIErrorCode(rawValue: 4040005)
    public static let originalTransactionIdNotFoundRetryable = APIErrorCode(rawValue: 4040006)
    public static let serverNotificationURLNotFound = APIErrorCode(rawValue: 4040007)
    public static let testNotificationNotFound = APIErrorCode(rawValue: 4040008)
    public static let transactionIdNotFound = APIErrorCode(rawValue: 4040010)
    public static let rateLimitExceeded = APIErrorCode(rawValue: 4290000)
    public static let generalInternal = APIErrorCode(rawValue: 5000000)
    public static let generalInternalRetryable = APIErrorCode(rawValue: 5000001)

    /// Apple's "errors to retry" group.
    public var isRetryable: Bool {
        [
            .accountNotFoundRetryable, .appNotFoundRetryable, .originalTransactionIdNotFoundRetryable,
            .generalInternalRetryable, .rateLimitExceeded,
        ].contains(self)
    }

    /// The request field a 400 error is about, so the message can say what to fix.
    public var field: String? {
        switch self {
        case .invalidRequestRevision: "revision"
        case .invalidTransactionId, .invalidOriginalTransactionId: "transactionId"
        case .startDateTooFarInPast, .invalidStartDate: "startDate"
        case .startDateAfterEndDate: "startDate/endDate"
        case .invalidEndDate: "endDate"
        case .invalidPaginationToken, .paginationTokenExpired: "paginationToken"
        case .invalidNotificationType: "notificationType/notificationSubtype"
        case .multipleFiltersSupplied: "transactionId and notificationType (only one may be set)"
        case .invalidSort: "sort"
        case .invalidProductType: "productType"
        case .invalidProductId: "productId"
        case .invalidSubscriptionGroupIdentifier: "subscriptionGroupIdentifier"
        case .invalidInAppOwnershipType: "inAppOwnershipType"
        case .invalidRevoked: "revoked"
        case .invalidStatus: "status"
        case .invalidAppIdentifier: "bundle id / app"
        case .invalidCustomerConsented: "customerConsented"
        case .invalidDeliveryStatus: "deliveryStatus"
        case .invalidSampleContentProvided: "sampleContentProvided"
        case .invalidRefundPreference: "refundPreference"
        case .consumptionPercentageAutoRenewableSubscription: "consumptionPercentage"
        case .invalidAppAccountTokenUUID: "appAccountToken"
        case .transactionIdIsNotOriginalTransactionId: "originalTransactionId"
        default: nil
        }
    }

    /// Apple's name of the error, for the codes this client knows (`InvalidCustomerConsentedError`).
    public var name: String? {
        switch self {
        case .generalBadRequest: "GeneralBadRequestError"
        case .invalidTransactionId: "InvalidTransactionIdError"
        case .invalidCustomerConsented: "InvalidCustomerConsentedError"
        case .invalidDeliveryStatus: "InvalidDeliveryStatusError"
        case .invalidSampleContentProvided: "InvalidSampleContentProvidedError"
        case .invalidRefundPreference: "InvalidRefundPreferenceError"
        case .appTransactionIdNotSupported: "AppTransactionIdNotSupportedError"
        case .familyTransactionNotSupported: "FamilyTransactionNotSupportedError"
        case .invalidAppAccountTokenUUID: "InvalidAppAccountTokenUUIDError"
        case .transactionIdIsNotOriginalTransactionId: "TransactionIdIsNotOriginalTransactionIdError"
        case .originalTransactionIdNotFound: "OriginalTransactionIdNotFoundError"
        case .consumptionPercentageAutoRenewableSubscription: "ConsumptionPercentageAutoRenewableSubscriptionError"
        case .transactionIdNotFound: "TransactionIdNotFoundError"
        case .rateLimitExceeded: "RateLimitExceededError"
        case .generalInternal: "GeneralInternalError"
        case .generalInternalRetryable: "GeneralInternalRetryableError"
        default: nil
        }
    }

    public var description: String { String(rawValue) }
}
