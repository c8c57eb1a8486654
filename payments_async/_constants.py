"""Every default on one screen: paths, timeouts, retries, polling, token and JWT leeways."""

from __future__ import annotations

from typing import Final

# --- Service paths (spec: Endpoints / Versioning) -------------------------------------
TOKEN_PATH: Final = "/oauth/token"
"""The path of the service's token endpoint. An error's ``path`` is this when obtaining the
access token failed, not the operation the caller asked for."""
PACS008_PATH: Final = "/payments/pacs008/v10"
PACS002_PATH: Final = "/payments/pacs002/v12"  # + "/{paymentsServiceId}"
CAMT056_PATH: Final = "/payments/camt056/v08"
CAMT029_PATH: Final = "/payments/camt029/v09"  # + "/{paymentsServiceId}"
PACS028_PATH: Final = "/payments/pacs028/v03"  # the service's docs (status request)

JWT_BEARER_GRANT: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_SCOPE: Final = "makePayments"
CLIENT_ID_HEADER: Final = "X-Service-Client-Id"
SCA_HEADER: Final = "sca-token"
REQUEST_ID_HEADER: Final = "X-Request-ID"
JSON_CONTENT_TYPE: Final = "application/json"
FORM_CONTENT_TYPE: Final = "application/x-www-form-urlencoded"

# --- Keys and JWTs (spec: Authentication; service-notes section 5) ---------------------
MIN_RSA_BITS: Final = 2048
"""The smallest RSA key the service takes, in bits: smaller keys are refused when loaded,
generated or registered."""
DEFAULT_KEYGEN_BITS: Final = 3072
"""The size, in bits, of the keys ``generate_key_pair`` writes unless
told otherwise."""
ASSERTION_LIFETIME: Final = 300.0  # seconds an authentication JWT is valid
SCA_TOKEN_LIFETIME: Final = 180.0  # seconds, as the provider's own client uses
JWT_LEEWAY: Final = 30.0  # clock skew tolerated by the verifiers (exp/nbf/iat)
# Past this difference between the service's clock (HTTP Date) and ours, JWTs are signed
# on the service's time: well above Date's one-second resolution plus a round trip, well
# below the verifiers' leeway, so a correction happens before a token is refused.
CLOCK_SKEW_THRESHOLD: Final = 5.0

# --- Access tokens ----------------------------------------------------------------------
TOKEN_REFRESH_LEEWAY: Final = 60.0  # refresh this long before expires_in runs out
TOKEN_REFRESH_FRACTION: Final = 0.2  # ...or this share of a short lifetime, if smaller
TOKEN_RETRY_INITIAL: Final = 0.5  # backoff of a failed background refresh
TOKEN_RETRY_MAX: Final = 30.0
TOKEN_REFRESH_MIN_INTERVAL: Final = 1.0  # never refresh sooner than this after obtaining

# --- Timeouts and limits (Timeout and Limits take their defaults from here) -------------
TIMEOUT_TOTAL: Final = 45.0  # one call, all attempts, waits and a token fetch included
TIMEOUT_CONNECT: Final = 5.0  # establishing one connection
TIMEOUT_READ: Final = 30.0  # the answer to begin, and each later read of its body
TIMEOUT_TOKEN: Final = 30.0  # one access-token fetch, its retries included
LIMIT_CONNECTIONS: Final = 100  # requests in flight (and open connections) per client
LIMIT_RESPONSE_BYTES: Final = 1 * 1024 * 1024  # bodies above this are refused

# --- HTTP -------------------------------------------------------------------------------
USER_AGENT: Final = "payments-async"

# --- OpenTelemetry (extra "otel") ------------------------------------------------------------
OTEL_INSTRUMENTATION_NAME: Final = "payments_async"
# The HTTP semantic conventions' advised buckets for http.client.request.duration (seconds).
OTEL_DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
)  # fmt: skip

# --- Retries (stamina-style names) -------------------------------------------------------
RETRY_ATTEMPTS: Final = 5
RETRY_WAIT_INITIAL: Final = 0.1
RETRY_WAIT_MAX: Final = 5.0
RETRY_WAIT_EXP_BASE: Final = 2.0
RETRY_AFTER_CAP: Final = 30.0  # never sleep longer than this for a Retry-After
RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
RETRY_BUDGET_CAPACITY: Final = 500  # botocore "standard": 500 tokens...
RETRY_BUDGET_COST: Final = 5  # ...a retry costs 5...
RETRY_BUDGET_TIMEOUT_COST: Final = 10  # ...a retry after a timeout costs 10...
RETRY_BUDGET_REFILL: Final = 1  # ...a success gives 1 back

# --- Client-side rate (RateLimit; adaptive as botocore's adaptive retry mode) -------------
RATE_LIMIT_BURST: Final = 1
"""Requests a ``RateLimit`` lets go at once after a quiet spell unless given a ``burst``:
1 spaces every request ``1 / per_second`` seconds apart."""
RATE_THROTTLED_STATUSES: Final = frozenset({429, 503})  # 503 only with Retry-After
RATE_ADAPTIVE_BETA: Final = 0.5  # a throttling answer multiplies the rate by this...
RATE_ADAPTIVE_MIN: Final = 0.5  # ...never below this many requests per second...
RATE_ADAPTIVE_SCALE: Final = 0.4  # ...and it grows back on botocore's cubic curve

# --- Polling (waiters) -------------------------------------------------------------------
POLL_INITIAL: Final = 0.5
POLL_MAX: Final = 10.0
POLL_MULTIPLIER: Final = 1.5
POLL_JITTER: Final = 0.1  # +-10% of each interval
POLL_TIMEOUT: Final = 300.0
"""Seconds a waiter (``wait_for_payment_status``, ``wait_for_cancellation_outcome``)
waits for a final status unless given a ``timeout``."""
POLL_NOT_FOUND_GRACE: Final = 5.0  # a 404 this soon after submission means "not visible yet"

# --- Sandbox (public, documented: not secrets) ---------------------------------------------
SANDBOX_CLIENT_ID: Final = "sandbox-client"
SANDBOX_CLIENT_SECRET: Final = "sandbox-secret"
SANDBOX_KEY_ID: Final = "sandbox-kid"
SANDBOX_ISSUER: Final = "sandbox-issuer"
# The spec's "predefined tokens": opaque values the sandbox accepts from SANDBOX_CLIENT_ID
# in place of a signed assertion / SCA token, so a user without keys can try it.
SANDBOX_ASSERTION: Final = "sandbox-predefined-assertion-v1"
SANDBOX_SCA_TOKEN: Final = "sandbox-predefined-sca-token-v1"

# --- Signing ----------------------------------------------------------------------------
SIGNING_THREADS: Final = 4  # ThreadPoolSigner's workers: at most this, and at most the cores
PKCS11_SIGN_MECHANISM: Final = "SHA256_RSA_PKCS"  # RS256 = RSASSA-PKCS1-v1_5 with SHA-256

# --- Notifications: the receiver's route (the CLI's too) and the waiters it wakes -----------
NOTIFY_PATH: Final = "/notifications"
"""The route the notification receiver's aiohttp app listens on unless given a ``path``."""
# With a receiver attached, polling is the safety net: it starts later and grows slower,
# so a lost notification costs latency, not correctness.
NOTIFIED_POLL_INITIAL: Final = 60.0
NOTIFIED_POLL_MAX: Final = 300.0
