"""Apple's Python library (app-store-server-library) pointed at the mock App Store: the API client
and the signed-data verifier, from the files `mock-appstore --credentials-dir DIR` writes
(reconciler.env, the .p8 key, the root certificate). Used by python-library-check.py and
apple-library-baseline.py."""
from appstoreserverlibrary.api_client import AppStoreServerAPIClient
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier
from cryptography import x509
from cryptography.hazmat.primitives import serialization


def connect(directory):
    """Returns (env, client, verifier): the settings of DIR/reconciler.env, a client whose base URL
    is the mock's, and a verifier trusting the mock's root with online checks off."""
    env = dict(line.strip().split("=", 1) for line in open(f"{directory}/reconciler.env") if "=" in line)
    environment = Environment.PRODUCTION if env["APP_STORE_ENVIRONMENT"] == "production" else Environment.SANDBOX
    client = AppStoreServerAPIClient(open(env["APP_STORE_PRIVATE_KEY_PATH"], "rb").read(), env["APP_STORE_KEY_ID"],
                                     env["APP_STORE_ISSUER_ID"], env["APP_STORE_BUNDLE_ID"], environment)
    client._base_url = env["APP_STORE_API_BASE_URL"]
    root = x509.load_pem_x509_certificate(open(env["APP_STORE_ROOT_CERTIFICATES"], "rb").read()).public_bytes(serialization.Encoding.DER)
    app_apple_id = int(env["APP_STORE_APP_APPLE_ID"]) if environment == Environment.PRODUCTION else None
    verifier = SignedDataVerifier([root], False, environment, env["APP_STORE_BUNDLE_ID"], app_apple_id)
    return env, client, verifier
