/// The app API's OpenAPI 3.1 document, served at `GET /v1/openapi.json` (a test validates it with
/// `openapi-spec-validator`). A new endpoint or field of ``AppAPIServer`` gets its lines here.
enum AppAPIDocument {
    static let json = #"""
        {
          "openapi": "3.1.0",
          "info": {
            "title": "App Store Reconciler app API",
            "version": "1",
            "summary": "The app's own path to its customers' purchases: read them, hand over fresh ones.",
            "description": "Served by `reconciler serve` on `appApi.port` when the configuration file has `appApi`. Every request needs `Authorization: Bearer <token>`, a token listed in `appApi.tokenFile`. Errors are `{\"error\": CODE, \"detail\": TEXT}` with the status the code says."
          },
          "security": [{"bearer": []}],
          "paths": {
            "/v1/purchases": {
              "get": {
                "operationId": "getPurchases",
                "summary": "The stored purchases one key names, in the export shape",
                "description": "Exactly one of originalTransactionId, transactionId, appAccountToken, appUserId. No match is an empty list. Parameter names are case-sensitive; a parameter missing, unknown, repeated or of the wrong form is 400 INVALID_QUERY.",
                "parameters": [
                  {"name": "bundleId", "in": "query", "required": true, "schema": {"type": "string"}},
                  {"name": "environment", "in": "query", "required": true, "schema": {"type": "string", "enum": ["production", "sandbox"]}},
                  {"name": "originalTransactionId", "in": "query", "schema": {"type": "string", "pattern": "^[0-9]{1,32}$"}},
                  {"name": "transactionId", "in": "query", "description": "Any transaction of the purchase, or its original.", "schema": {"type": "string", "pattern": "^[0-9]{1,32}$"}},
                  {"name": "appAccountToken", "in": "query", "description": "A UUID, matched in either letter case.", "schema": {"type": "string", "format": "uuid"}},
                  {"name": "appUserId", "in": "query", "description": "The app's own user ID for the customer, as reconciler import stores it.", "schema": {"type": "string", "maxLength": 255}},
                  {"name": "refresh", "in": "query", "description": "Read Apple first (Get Transaction History from the stored revision and Get All Subscription Statuses for the customers the key names; an unknown transaction ID is looked up at Apple, an appAccountToken or appUserId the store does not know is not). if-stale: only when a purchase's customer was checked longer than maxAge ago, or never, or nothing is stored. Purchases are fresh: true when Apple answered within timeout; past it, with the budget spent, or for an app without an In-App Purchase key, the stored state with fresh: false (the refresh may complete in the background).", "schema": {"type": "string", "enum": ["if-stale", "always"]}},
                  {"name": "maxAge", "in": "query", "description": "With refresh=if-stale: a duration with its unit (500ms, 60s, 5m); default 60s.", "schema": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d|w)$"}},
                  {"name": "timeout", "in": "query", "description": "With refresh: the longest the answer waits for Apple, a duration with its unit, more than 0 and at most 30s; default 3s.", "schema": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d|w)$"}}
                ],
                "responses": {
                  "200": {
                    "description": "The purchases (possibly none).",
                    "content": {"application/json": {"schema": {
                      "type": "object", "required": ["purchases"],
                      "properties": {"purchases": {"type": "array", "items": {"$ref": "#/components/schemas/Purchase"}}}
                    }}}
                  },
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/v1/transactions": {
              "post": {
                "operationId": "handOverTransaction",
                "summary": "Record a signed transaction the app got from StoreKit",
                "description": "Verified as a notification's transaction is (the chain to the pinned roots, the signature), routed by its signed bundleId and environment, applied as a snapshot that never regresses newer state, with a change-feed row of source `app`. A forgery or malformed value is 400 and nothing is written; an app or environment not configured is 503 APP_NOT_CONFIGURED.",
                "requestBody": {
                  "required": true,
                  "content": {"application/json": {"schema": {
                    "type": "object", "required": ["signedTransaction"],
                    "properties": {"signedTransaction": {"type": "string", "description": "StoreKit's Transaction.jwsRepresentation."}}
                  }}}
                },
                "responses": {
                  "200": {
                    "description": "The purchase as stored afterwards.",
                    "content": {"application/json": {"schema": {
                      "type": "object", "required": ["purchase"],
                      "properties": {"purchase": {"$ref": "#/components/schemas/Purchase"}}
                    }}}
                  },
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "413": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/v1/consumption/{transactionId}": {
              "post": {
                "operationId": "answerConsumptionRequest",
                "summary": "Answer a consumption request as the app, sent to Apple at once",
                "description": "The fields of `reconciler consumption send`, checked against Apple's rules, sent with Send Consumption Information inside the app's shared request budget, and recorded with answeredBy `app`.",
                "parameters": [
                  {"name": "transactionId", "in": "path", "required": true, "description": "The CONSUMPTION_REQUEST's transactionId.", "schema": {"type": "string", "pattern": "^[0-9]{1,32}$"}},
                  {"name": "bundleId", "in": "query", "required": true, "schema": {"type": "string"}},
                  {"name": "environment", "in": "query", "required": true, "schema": {"type": "string", "enum": ["production", "sandbox"]}}
                ],
                "requestBody": {
                  "required": true,
                  "content": {"application/json": {"schema": {
                    "type": "object", "required": ["customerConsented", "deliveryStatus", "sampleContentProvided"],
                    "properties": {
                      "customerConsented": {"type": "boolean", "description": "Must be true: without the customer's consent, do not answer."},
                      "deliveryStatus": {"type": "string", "enum": ["DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER"]},
                      "sampleContentProvided": {"type": "boolean"},
                      "refundPreference": {"type": "string", "enum": ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]},
                      "consumptionPercentage": {"type": "integer", "minimum": 0, "maximum": 100000, "description": "Milliunits: 100000 is all of it."}
                    }
                  }}}
                },
                "responses": {
                  "202": {
                    "description": "Apple accepted it; recorded as the app's answer.",
                    "content": {"application/json": {"schema": {
                      "type": "object", "required": ["answeredBy", "transactionId"],
                      "properties": {"answeredBy": {"type": "string", "const": "app"}, "transactionId": {"type": "string"}}
                    }}}
                  },
                  "400": {"description": "CONSUMPTION_REFUSED by Apple's rules or by Apple (appleErrorCode when Apple refused), or INVALID_QUERY, MALFORMED_BODY.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "404": {"description": "UNKNOWN_CONSUMPTION_REQUEST: none is stored for the transaction in that app and environment.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                  "409": {"description": "CONSUMPTION_ALREADY_ANSWERED: answered, acked, or an answer is being sent; nothing sent.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                  "413": {"$ref": "#/components/responses/Error"},
                  "503": {"description": "APPLE_UNREACHABLE (retry), NO_API_KEY (no In-App Purchase key for the app) or APP_NOT_CONFIGURED.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                }
              }
            },
            "/v1/openapi.json": {
              "get": {
                "operationId": "getOpenAPIDocument",
                "summary": "This document",
                "responses": {
                  "200": {"description": "The OpenAPI 3.1 document.", "content": {"application/json": {"schema": {"type": "object"}}}},
                  "401": {"$ref": "#/components/responses/Unauthorized"}
                }
              }
            }
          },
          "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "A token listed in appApi.tokenFile."}},
            "responses": {
              "Error": {"description": "Refused or failed; the code says why.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "Unauthorized": {
                "description": "No Authorization: Bearer header, or a token the token file does not list. No data.",
                "headers": {"WWW-Authenticate": {"schema": {"type": "string", "const": "Bearer"}}},
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
              }
            },
            "schemas": {
              "Error": {
                "type": "object", "required": ["error", "detail"],
                "properties": {
                  "error": {"type": "string", "examples": ["UNAUTHORIZED", "INVALID_QUERY", "APP_NOT_CONFIGURED", "MALFORMED_BODY", "INVALID_SIGNATURE", "STORE_UNAVAILABLE", "CONSUMPTION_REFUSED", "CONSUMPTION_ALREADY_ANSWERED", "UNKNOWN_CONSUMPTION_REQUEST", "APPLE_UNREACHABLE", "NO_API_KEY"]},
                  "detail": {"type": "string"},
                  "appleErrorCode": {"type": "integer", "description": "Apple's error code, when Apple refused a consumption answer."}
                }
              },
              "Purchase": {
                "type": "object",
                "description": "A line of `reconciler export` (dates are UNIX milliseconds as Apple signs them), with checkedAt and fresh.",
                "required": ["originalTransactionId", "entitled", "checkedAt", "fresh"],
                "properties": {
                  "originalTransactionId": {"type": "string"},
                  "latestTransactionId": {"type": ["string", "null"]},
                  "productId": {"type": ["string", "null"]},
                  "bundleId": {"type": ["string", "null"]},
                  "environment": {"type": ["string", "null"], "enum": ["Production", "Sandbox", null]},
                  "purchaseDate": {"type": ["integer", "null"]},
                  "expiresDate": {"type": ["integer", "null"]},
                  "revocationDate": {"type": ["integer", "null"]},
                  "autoRenewStatus": {"type": ["integer", "null"]},
                  "lastSignedDate": {"type": ["integer", "null"]},
                  "appAccountToken": {"type": ["string", "null"]},
                  "status": {"type": ["integer", "null"]},
                  "entitled": {"type": ["boolean", "null"]},
                  "appTransactionId": {"type": ["string", "null"]},
                  "revocationType": {"type": ["string", "null"]},
                  "revocationPercentage": {"type": ["integer", "null"]},
                  "offerType": {"type": ["integer", "null"]},
                  "offerIdentifier": {"type": ["string", "null"]},
                  "checkedAt": {"type": ["integer", "null"], "description": "When Apple was last asked about the purchase's customer (UNIX ms); null when never."},
                  "fresh": {"type": "boolean", "description": "true only when Apple answered for this request."}
                }
              }
            }
          }
        }
        """#
}
