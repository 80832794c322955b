"""The baseline of issue 10's benchmark: the script a careful user would write with Apple's own
Python library (app-store-server-library 3.1.2) to recover an outage window, timed.

    python3 apple-library-baseline.py DIR START_MS END_MS

DIR is the mock's --credentials-dir (reconciler.env, root.pem, the .p8 key); START_MS and END_MS
bound the window in UNIX milliseconds. It runs one sequential loop, as the library invites:
  1. pages Get Notification History over the window with one unfiltered query, verifying every
     signedPayload and its signed transaction and renewal info with SignedDataVerifier (the mock's
     root, online checks off), and collects the purchases it touched;
  2. reads each touched customer's Get Transaction History (v2, ascending, from the start),
     verifying every signed transaction; a purchase already seen in a customer's history read
     earlier is not read again (the history covers the whole customer).
It applies nothing to any database: the reconciler's time includes PostgreSQL, this does not.
It prints a summary, then one JSON line with the figures for jobs/dev/benchmark."""
import json, sys, time
from appstoreserverlibrary.api_client import APIException, GetTransactionHistoryVersion
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest, Order
from mock_credentials import connect

directory, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
_, client, verifier = connect(directory)

requests = retries = 0


def call(function, *arguments):
    """The library neither retries nor exposes Retry-After: a careful user waits and tries again
    on 429 and 5xx."""
    global requests, retries
    for attempt in range(20):
        requests += 1
        try:
            return function(*arguments)
        except APIException as error:
            if error.http_status_code != 429 and error.http_status_code < 500:
                raise
            retries += 1
            time.sleep(min(0.5 * 2 ** attempt, 8))
    raise RuntimeError("the App Store kept refusing")


began = time.monotonic()
notifications = signed_values = 0
touched = {}  # originalTransactionId -> a transactionId of it, in the order first seen
token = None
request = NotificationHistoryRequest(startDate=start, endDate=end)
while True:
    response = call(client.get_notification_history, token, request)
    for item in response.notificationHistory:
        notification = verifier.verify_and_decode_notification(item.signedPayload)
        notifications += 1
        if notification.data and notification.data.signedTransactionInfo:
            transaction = verifier.verify_and_decode_signed_transaction(notification.data.signedTransactionInfo)
            signed_values += 1
            touched.setdefault(transaction.originalTransactionId, transaction.transactionId)
        if notification.data and notification.data.signedRenewalInfo:
            verifier.verify_and_decode_renewal_info(notification.data.signedRenewalInfo)
            signed_values += 1
        if notification.appData and notification.appData.signedAppTransactionInfo:
            verifier.verify_and_decode_app_transaction(notification.appData.signedAppTransactionInfo)
            signed_values += 1
    if not response.hasMore:
        break
    token = response.paginationToken
history_done = time.monotonic()

transactions = customers = 0
seen = set()
for original, transaction_id in touched.items():
    if original in seen:
        continue
    customers += 1
    revision = None
    while True:
        history = call(client.get_transaction_history, transaction_id, revision, TransactionHistoryRequest(sort=Order.ASCENDING),
                       GetTransactionHistoryVersion.V2)
        for signed in history.signedTransactions or []:
            seen.add(verifier.verify_and_decode_signed_transaction(signed).originalTransactionId)
            transactions += 1
        revision = history.revision
        if not history.hasMore:
            break
elapsed = time.monotonic() - began

print(f"apple-library baseline: {elapsed:.1f} s, {requests} requests ({retries} retried), nothing applied to a database")
print(f"  notification history: {notifications} notifications (+{signed_values} nested signed values) verified in {history_done - began:.1f} s")
print(f"  transaction history: {customers} customers ({len(touched)} purchases touched), {transactions} transactions verified"
      f" in {elapsed - (history_done - began):.1f} s")
print(json.dumps({"seconds": round(elapsed, 3), "requests": requests, "retries": retries, "notifications": notifications,
                  "nestedSignedValues": signed_values, "purchasesTouched": len(touched), "customers": customers,
                  "transactions": transactions}))
