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
                  {"name": "appUserId", "in": "query", "description": "The app's own user ID for the customer, as reconciler import stores it.", "schema": {"type": "string", "maxLength": 255}}
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
                  "error": {"type": "string", "examples": ["UNAUTHORIZED", "INVALID_QUERY", "APP_NOT_CONFIGURED", "MALFORMED_BODY", "INVALID_SIGNATURE", "STORE_UNAVAILABLE"]},
                  "detail": {"type": "string"}
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
