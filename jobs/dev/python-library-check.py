"""Drives the mock App Store with Apple's own Python library (app-store-server-library):
pages through notification and transaction history (every payload kind, those without `data`
included), reads subscription statuses, looks up order IDs, and verifies every signed value with
the mock's root certificate. Usage: python3 python-library-check.py DIR
where DIR is the mock's --credentials-dir."""
import collections, json, sys, time, urllib.request
from appstoreserverlibrary.api_client import APIException, GetTransactionHistoryVersion
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.NotificationTypeV2 import NotificationTypeV2
from appstoreserverlibrary.models.OrderLookupStatus import OrderLookupStatus
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest, Order
from mock_credentials import connect

def call(function, *arguments):
    """Apple's library does not retry; the mock enforces Apple's rate limit (5/s in the sandbox)."""
    for _ in range(30):
        try:
            return function(*arguments)
        except APIException as error:
            if error.http_status_code != 429:
                raise
            time.sleep(0.5)
    raise RuntimeError("still rate limited")


directory = sys.argv[1]
env, client, verifier = connect(directory)

now = int(time.time() * 1000)
request = NotificationHistoryRequest(startDate=now - 2 * 86_400_000, endDate=now)
token, notifications, pages, purchases, without_data = None, 0, 0, set(), collections.Counter()
while True:
    response = call(client.get_notification_history, token, request)
    pages += 1
    for item in response.notificationHistory:
        notification = verifier.verify_and_decode_notification(item.signedPayload)
        notifications += 1
        if notification.data and notification.data.signedTransactionInfo:
            purchases.add(verifier.verify_and_decode_signed_transaction(notification.data.signedTransactionInfo).originalTransactionId)
        if notification.data and notification.data.signedRenewalInfo:
            verifier.verify_and_decode_renewal_info(notification.data.signedRenewalInfo)
        if not notification.data:
            # The library keeps subtypes it does not know (CREATED, ACTIVE_TOKEN_REMINDER) as raw strings.
            without_data[f"{notification.rawNotificationType}/{notification.rawSubtype or ''}"] += 1
        if notification.appData and notification.appData.signedAppTransactionInfo:
            verifier.verify_and_decode_app_transaction(notification.appData.signedAppTransactionInfo)
    if not response.hasMore:
        break
    token = response.paginationToken
print(f"notification history: {notifications} notifications in {pages} pages, all verified")
expected = {"RENEWAL_EXTENSION/SUMMARY", "EXTERNAL_PURCHASE_TOKEN/CREATED", "EXTERNAL_PURCHASE_TOKEN/ACTIVE_TOKEN_REMINDER",
            "EXTERNAL_PURCHASE_TOKEN/UNREPORTED", "RESCIND_CONSENT/"}
if set(without_data) != expected:
    sys.exit(f"payloads without data: expected {sorted(expected)}, got {sorted(without_data)}")
print(f"payloads without data: {dict(sorted(without_data.items()))}, all verified")
checked = 0
for original in sorted(purchases)[:20]:
    revision = None
    while True:
        history = call(client.get_transaction_history, original, revision, TransactionHistoryRequest(sort=Order.ASCENDING, revoked=False),
                       GetTransactionHistoryVersion.V2)
        for signed in history.signedTransactions:
            verifier.verify_and_decode_signed_transaction(signed)
            checked += 1
        revision = history.revision
        if not history.hasMore:
            break
    statuses = call(client.get_all_subscription_statuses, original)
    for group in statuses.data:
        for item in group.lastTransactions:
            verifier.verify_and_decode_signed_transaction(item.signedTransactionInfo)
            if item.signedRenewalInfo:
                verifier.verify_and_decode_renewal_info(item.signedRenewalInfo)
print(f"transaction history and statuses of 20 customers: {checked} transactions, all verified")
orders = [json.loads(line) for line in urllib.request.urlopen(env["APP_STORE_API_BASE_URL"] + "/mock/orders").read().splitlines()]
for order in orders[:3]:
    found = call(client.look_up_order_id, order["orderId"])
    if found.status != OrderLookupStatus.VALID:
        sys.exit(f"order {order['orderId']}: status {found.rawStatus}")
    ids = [verifier.verify_and_decode_signed_transaction(signed).transactionId for signed in found.signedTransactions]
    if ids != [order["transactionId"]]:
        sys.exit(f"order {order['orderId']}: transactions {ids}, expected {order['transactionId']}")
unknown = call(client.look_up_order_id, "0000000000")
if unknown.status != OrderLookupStatus.INVALID or unknown.signedTransactions:
    sys.exit(f"unknown order: status {unknown.rawStatus}")
print(f"look up order id: {min(3, len(orders))} orders found and verified, an unknown one is status 1")
try:
    call(client.get_notification_history, None, NotificationHistoryRequest(startDate=now - 3_600_000, endDate=now,
         notificationType=NotificationTypeV2.DID_RENEW, transactionId=sorted(purchases)[0]))
    sys.exit("expected MultipleFiltersSuppliedError")
except APIException as error:
    print(f"both filters: HTTP {error.http_status_code}, errorCode {error.raw_api_error} ({error.api_error})")
print("OK")
