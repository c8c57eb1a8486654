"""The receiver's defaults, each a keyword argument's default of the public API."""

from __future__ import annotations

from typing import Final

__all__ = [
    "NOTIFY_BODY_READ_TIMEOUT",
    "NOTIFY_CALLBACK_ATTEMPTS",
    "NOTIFY_CALLBACK_WAIT",
    "NOTIFY_CALLBACK_WAIT_MAX",
    "NOTIFY_INBOX_POLL",
    "NOTIFY_JWKS_CACHE_SECONDS",
    "NOTIFY_JWKS_MAX_BYTES",
    "NOTIFY_JWKS_MIN_REFRESH_INTERVAL",
    "NOTIFY_JWKS_TIMEOUT",
    "NOTIFY_JWT_ALGORITHMS",
    "NOTIFY_LEASE",
    "NOTIFY_MAX_BODY_BYTES",
    "NOTIFY_NOT_FOUND_READS",
    "NOTIFY_NOT_FOUND_WAIT",
    "NOTIFY_OUTAGE_SETTLE",
    "NOTIFY_PRUNE_EVERY",
    "NOTIFY_QUEUE_SIZE",
    "NOTIFY_RETENTION",
    "NOTIFY_SEEN_CAPACITY",
    "NOTIFY_SWEEP_GRACE",
    "NOTIFY_SWEEP_RATE",
    "NOTIFY_WORKERS",
    "NOTIFY_WRITE_WAIT",
    "NOTIFY_WRITE_WAIT_MAX",
]

NOTIFY_MAX_BODY_BYTES: Final = 256 * 1024  # a notification body above this is refused (413)
NOTIFY_BODY_READ_TIMEOUT: Final = 10.0  # seconds for a whole body to arrive; then 408 + close
NOTIFY_QUEUE_SIZE: Final = 10_000  # the in-memory inbox's unprocessed notifications; full: 503
NOTIFY_WORKERS: Final = 32  # confirming reads in flight at once
NOTIFY_SEEN_CAPACITY: Final = 100_000  # final statuses remembered for deduplication
NOTIFY_JWT_ALGORITHMS: Final = ("RS256", "ES256")  # bearer JWTs: only these algorithms
NOTIFY_CALLBACK_ATTEMPTS: Final = 5  # a callback that raises is tried this often, then parked
NOTIFY_CALLBACK_WAIT: Final = 1.0  # seconds before the first retry of a failed callback
NOTIFY_CALLBACK_WAIT_MAX: Final = 60.0  # retries wait twice as long each time, up to this
NOTIFY_NOT_FOUND_READS: Final = 3  # confirming reads answered 404, then the notice is parked
NOTIFY_NOT_FOUND_WAIT: Final = 2.0  # seconds before the second such read; then twice as long
NOTIFY_INBOX_POLL: Final = 0.5  # seconds between looks for due items nobody announced
NOTIFY_LEASE: Final = 60.0  # a shared inbox: a receiver whose heartbeat is this old is dead
NOTIFY_WRITE_WAIT: Final = 0.1  # seconds before a failed write of a delivery is tried again
NOTIFY_WRITE_WAIT_MAX: Final = 5.0  # those retries wait twice as long each time, up to this
# an inbox outage is said to be over at the first success this long after its last failure
# (a nearly full disk lets small writes pass between failed ones)
NOTIFY_OUTAGE_SETTLE: Final = NOTIFY_WRITE_WAIT_MAX
NOTIFY_SWEEP_GRACE: Final = 60.0  # seconds a tracked id may go unnotified before it is read
NOTIFY_SWEEP_RATE: Final = 10.0  # tracked ids read per second at most by the sweep
NOTIFY_JWKS_CACHE_SECONDS: Final = 300.0  # fetched JWKS keys are used this long, then refetched
NOTIFY_JWKS_MIN_REFRESH_INTERVAL: Final = 10.0  # never two JWKS fetches closer than this
NOTIFY_JWKS_TIMEOUT: Final = 5.0  # seconds one JWKS fetch may take
NOTIFY_JWKS_MAX_BYTES: Final = 64 * 1024  # a larger JWKS document is refused
NOTIFY_RETENTION: Final = 30 * 86_400.0  # seconds done items and delivered marks are kept
NOTIFY_PRUNE_EVERY: Final = 3_600.0  # seconds between deletions of what is past retention
