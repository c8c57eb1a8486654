"""The sandbox's state: clients, access tokens, replay caches, messages, counters.

Every per-request operation is a few dict lookups. Statuses are computed from timestamps
when read (see ``_lifecycle``), so nothing here needs a timer or a background task.
"""

from __future__ import annotations

import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from aiohttp import web

from .._errors import Problem
from ..iso20022 import RECALL_MESSAGE_NAME
from ._config import FaultConfig, SandboxConfig
from ._faults import FAULT_KINDS, FaultInjector
from ._lifecycle import (
    ACCC,
    REASON_ALREADY_CANCELLED,
    REASON_NOT_RECEIVED,
    REASON_PROCESSED,
    RJCT,
    CancellationRecord,
    PaymentRecord,
    StatusRequestRecord,
    format_creation_date_time,
)
from ._registry import ClientRecord, Registry
from ._store import SqliteStore

if TYPE_CHECKING:
    from ..iso20022 import Camt056, Pacs008, Pacs028

R = TypeVar("R", PaymentRecord, CancellationRecord, StatusRequestRecord)

__all__ = ["AccessToken", "ReplayCache", "SandboxState", "Stats"]

_SWEEP_MIN = 4096  # replay/token maps are swept of expired entries past this size
SEPA_CURRENCY: Final = "EUR"
"""The one currency of a SEPA credit transfer; a payment in another ends RJCT with AM03."""


class ReplayCache:
    """Single-use keys (``jti``/``nonce``), remembered until the token they came in expires.

    After that the token itself is refused as expired, so forgetting the key is safe.

    Args:
        on_add: called with each new key and its expiry (to persist it), if given.
    """

    def __init__(self, on_add: Callable[[str, float], None] | None = None) -> None:
        self._seen: dict[str, float] = {}
        self._sweep_at = _SWEEP_MIN
        self._on_add = on_add

    def restore(self, key: str, expires_at: float) -> None:
        """Remember ``key`` again (loading persisted state), without calling ``on_add``."""
        self._seen[key] = expires_at

    def __len__(self) -> int:
        return len(self._seen)

    def check_and_add(self, key: str, expires_at: float, now: float) -> bool:
        """Record ``key``; True when it is new, False when it was already seen (a replay)."""
        seen = self._seen.get(key)
        if seen is not None and seen >= now:
            return False
        self._seen[key] = expires_at
        if self._on_add is not None:
            self._on_add(key, expires_at)
        if len(self._seen) > self._sweep_at:
            self._sweep(now)
        return True

    def _sweep(self, now: float) -> None:
        self._seen = {k: v for k, v in self._seen.items() if v >= now}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._seen))


@dataclass(frozen=True, slots=True)
class AccessToken:
    """What the sandbox knows of an access token it issued.

    Attributes:
        client_id: the client it was issued to.
        expires_at: epoch seconds when it stops working.
        kid: the ``kid`` of the assertion it was issued for; SCA tokens sent with it must
            carry the same ``kid`` (spec, Authentication 5).
        iss: the ``iss`` of that assertion; SCA tokens must carry the same ``iss``.
    """

    client_id: str
    expires_at: float
    kid: str
    iss: str


@dataclass(slots=True)
class Stats:
    """Counters tests read to prove nothing was lost or duplicated.

    Attributes:
        requests: requests by route name (``token``, ``pacs008``, ``pacs002``, ``camt056``,
            ``camt029``, ``control``, ``other``).
        responses: responses by status code (as text), injected faults included.
        faults: injected faults by kind (``error_500`` ... ``latency``).
        payments_stored: pacs.008 messages stored (first submissions).
        cancellations_stored: camt.056 messages stored (first submissions).
        status_requests_stored: pacs.028 messages stored (first submissions).
        recalls_chased: of them, those that found their recall pending and answered it.
        replays_answered: resubmissions of a stored id (200), whatever their body.
        replays_changed_body: those of them whose body differed from the stored message
            (answered 200 all the same, as the service does; the stored message is kept).
        token_requests: ``POST /oauth/token`` requests received.
        tokens_issued: access tokens issued.
    """

    requests: Counter[str] = field(default_factory=Counter)
    responses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    payments_stored: int = 0
    cancellations_stored: int = 0
    status_requests_stored: int = 0
    recalls_chased: int = 0
    replays_answered: int = 0
    replays_changed_body: int = 0
    token_requests: int = 0
    tokens_issued: int = 0

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy (what ``GET /_sandbox/stats`` returns)."""
        return {
            "requests": dict(self.requests),
            "responses": dict(self.responses),
            "faults": {kind: self.faults.get(kind, 0) for kind in FAULT_KINDS},
            "faults_total": sum(self.faults.values()),
            "payments_stored": self.payments_stored,
            "cancellations_stored": self.cancellations_stored,
            "status_requests_stored": self.status_requests_stored,
            "recalls_chased": self.recalls_chased,
            "replays_answered": self.replays_answered,
            "replays_changed_body": self.replays_changed_body,
            "token_requests": self.token_requests,
            "tokens_issued": self.tokens_issued,
        }


class SandboxState:
    """All mutable state of one sandbox; handlers call it, tests read it.

    Args:
        config: the sandbox configuration.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.clock: Callable[[], float] = config.clock
        if config.clock_skew:
            base, skew = config.clock, config.clock_skew
            self.clock = lambda: base() + skew
        self.registry = Registry()
        self.stats = Stats()
        self.faults = FaultInjector(config.faults)
        self.payments: dict[str, PaymentRecord] = {}
        self.cancellations: dict[str, CancellationRecord] = {}
        self._payment_ids: dict[tuple[str, str], str] = {}  # (client, msgId) -> id
        self._cancellation_ids: dict[tuple[str, str], str] = {}  # (client, assgnmt.id) -> id
        self.status_requests: dict[str, StatusRequestRecord] = {}
        self._status_request_ids: dict[tuple[str, str], str] = {}  # (client, msgId) -> id
        self._by_end_to_end: dict[tuple[str, str], list[str]] = {}  # (client, e2e) -> ids
        self._tokens: dict[str, AccessToken] = {}
        self._token_sweep_at = _SWEEP_MIN
        self._token_outage_until = 0.0
        self._token_outage_status = 503
        self._store: SqliteStore | None = None
        if config.persist_path is not None:
            self._store = SqliteStore(config.persist_path)
        self.assertion_jtis = ReplayCache(self._persister("assertion_jti"))
        self.sca_nonces = ReplayCache(self._persister("sca_nonce"))
        self.sca_jtis = ReplayCache(self._persister("sca_jti"))
        if self._store is not None:
            self._load(self._store)
        for key in config.clients:
            self.register_client(
                key.client_id, key.client_secret, key.public_key_pem, kid=key.kid, iss=key.iss
            )

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the SQLite file, if any."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def _persister(self, cache: str) -> Callable[[str, float], None] | None:
        store = self._store
        if store is None:
            return None
        return lambda key, expires_at: store.save_seen(cache, key, expires_at)

    def _load(self, store: SqliteStore) -> None:
        caches = {
            "assertion_jti": self.assertion_jtis,
            "sca_nonce": self.sca_nonces,
            "sca_jti": self.sca_jtis,
        }
        for cache, key, expires_at in store.load_seen(self.now()):
            if cache in caches:
                caches[cache].restore(key, expires_at)
        for client_id, secret, kid, iss, pem in store.load_clients():
            self.registry.register(client_id, secret, pem, kid=kid, iss=iss)
        for p in store.load_payments():
            self._index_payment(p)
        for c in store.load_cancellations():
            c.accepted = bool(c.accepted)
            self.cancellations[c.payments_service_id] = c
            self._cancellation_ids[(c.client_id, c.assignment_id)] = c.payments_service_id
        for r in store.load_status_requests():
            self.status_requests[r.payments_service_id] = r
            self._status_request_ids[(r.client_id, r.msg_id)] = r.payments_service_id

    def now(self) -> float:
        """The sandbox's clock (epoch seconds)."""
        return self.clock()

    # --- clients ---------------------------------------------------------------------

    def register_client(
        self, client_id: str, secret: str, public_key_pem: str | bytes, *, kid: str, iss: str
    ) -> ClientRecord:
        """Register a client key (see `Registry.register`) and persist it.

        Raises:
            ConfigurationError: the key is under 2048 bits, malformed or not RSA, or the
                secret differs from the existing client's.
        """
        record = self.registry.register(client_id, secret, public_key_pem, kid=kid, iss=iss)
        if self._store is not None:
            self._store.save_client(client_id, secret, kid, iss, record.key_pems[kid])
        return record

    # --- access tokens ---------------------------------------------------------------

    def issue_token(self, client_id: str, *, kid: str, iss: str) -> str:
        """Issue an opaque access token for ``client_id``, valid ``token_lifetime`` s.

        Args:
            client_id: the client authenticated by the token request.
            kid: the ``kid`` of the assertion it is issued for.
            iss: the ``iss`` of that assertion.
        """
        now = self.now()
        token = secrets.token_urlsafe(32)
        self._tokens[token] = AccessToken(client_id, now + self.config.token_lifetime, kid, iss)
        self.stats.tokens_issued += 1
        if len(self._tokens) > self._token_sweep_at:
            self._tokens = {t: v for t, v in self._tokens.items() if v.expires_at > now}
            self._token_sweep_at = max(_SWEEP_MIN, 2 * len(self._tokens))
        return token

    def access_token(self, token: str) -> AccessToken | None:
        """What was issued as ``token`` (expired or not), or None when unknown or revoked."""
        return self._tokens.get(token)

    def token_owner(self, token: str) -> tuple[str | None, bool]:
        """``(client_id, expired)`` of an access token; ``(None, False)`` if unknown."""
        entry = self._tokens.get(token)
        if entry is None:
            return None, False
        return entry.client_id, self.now() >= entry.expires_at

    def revoke_tokens(self) -> int:
        """Forget every access token; clients get 401 and must fetch new ones."""
        n = len(self._tokens)
        self._tokens = {}
        return n

    @property
    def active_tokens(self) -> int:
        """Access tokens issued and not yet expired or revoked."""
        now = self.now()
        return sum(1 for t in self._tokens.values() if t.expires_at > now)

    def fail_token_endpoint(self, seconds: float, status: int = 503) -> None:
        """Make ``POST /oauth/token`` answer ``status`` for the next ``seconds``."""
        self._token_outage_until = self.now() + seconds
        self._token_outage_status = status

    def token_outage_status(self) -> int | None:
        """The status the token endpoint must answer now, or None when it works."""
        if self._token_outage_until and self.now() < self._token_outage_until:
            return self._token_outage_status
        return None

    # --- faults ----------------------------------------------------------------------

    def set_faults(self, faults: FaultConfig) -> None:
        """Replace the fault settings (and reseed)."""
        self.faults.configure(faults)

    # --- payments --------------------------------------------------------------------

    def _index_payment(self, p: PaymentRecord) -> None:
        self.payments[p.payments_service_id] = p
        self._payment_ids[(p.client_id, p.msg_id)] = p.payments_service_id
        self._by_end_to_end.setdefault((p.client_id, p.end_to_end_id), []).append(
            p.payments_service_id
        )

    def _decide_payment(self, msg: Pacs008) -> tuple[str, str | None]:
        tx = msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0]
        acct = tx.cdtr_acct.id
        iban = acct.othr.id if acct.othr is not None else acct.iban
        if tx.intr_bk_sttlm_amt.ccy != SEPA_CURRENCY:
            return RJCT, "AM03"  # currency not allowed
        reason = self.config.reject_creditor_ibans.get(iban or "")
        if reason is not None:
            return RJCT, reason
        limit = self.config.amount_limit
        if limit is not None and tx.intr_bk_sttlm_amt.value > limit:
            return RJCT, "AM02"
        return ACCC, None

    def _stored(
        self,
        ids: Mapping[tuple[str, str], str],
        records: Mapping[str, R],
        client_id: str,
        msg: Pacs008 | Camt056 | Pacs028,
        body_hash: str,
    ) -> R | None:
        """The record already stored under this client's message id (a replay), if any.

        The stored record wins whatever the new body says (service notes 2): the service
        does not compare bodies, so neither does the answer; a changed body is only counted.
        """
        existing = ids.get((client_id, msg.message_id))
        if existing is None:
            return None
        record = records[existing]
        self.stats.replays_answered += 1
        if record.body_hash != body_hash:
            self.stats.replays_changed_body += 1
        return record

    def submit_payment(
        self, client_id: str, msg: Pacs008, body_hash: str
    ) -> tuple[PaymentRecord, bool]:
        """Store a pacs.008 or find the one stored under its ``grpHdr.msgId``.

        Returns:
            The record and True when it was created now (201), False for a resubmission
            (200; the stored record, unchanged, whatever the new body).
        """
        stored = self._stored(self._payment_ids, self.payments, client_id, msg, body_hash)
        if stored is not None:
            return stored, False
        now = self.now()
        tx = msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0]
        code, reason = self._decide_payment(msg)
        record = PaymentRecord(
            payments_service_id=f"pmt-{uuid.uuid4().hex}",
            client_id=client_id,
            msg_id=msg.message_id,
            end_to_end_id=tx.pmt_id.end_to_end_id,
            tx_id=tx.pmt_id.tx_id,
            uetr=tx.pmt_id.uetr,
            body_hash=body_hash,
            created_at=now,
            processed_at=now + self.config.processing_delay,
            final_code=code,
            final_reason=reason,
        )
        self._index_payment(record)
        self.stats.payments_stored += 1
        if self._store is not None:
            self._store.save_payment(record)
        return record, True

    def save(self, record: PaymentRecord | CancellationRecord) -> None:
        """Persist a record changed in place (a no-op without a SQLite file)."""
        if self._store is None:
            return
        if isinstance(record, PaymentRecord):
            self._store.save_payment(record)
        else:
            self._store.save_cancellation(record)

    # --- cancellations ---------------------------------------------------------------

    def submit_cancellation(
        self, client_id: str, msg: Camt056, body_hash: str
    ) -> tuple[CancellationRecord, bool]:
        """Store a camt.056 (deciding its outcome now) or find the one stored under its id.

        The decision follows the spec's business rule: accepted when the original payment
        (same client, ``orgnlEndToEndId``) has not been processed at this instant, which
        also stops that payment; otherwise rejected with the reason code of
        ``_decide_cancellation`` (docs/sandbox.md lists them). It becomes visible after
        ``settlement_delay``.

        Returns:
            The record and True when it was created now (201), False for a resubmission
            (200; the stored record, unchanged, whatever the new body).
        """
        replay = self._stored(self._cancellation_ids, self.cancellations, client_id, msg, body_hash)
        if replay is not None:
            return replay, False

        now = self.now()
        body = msg.fito_fi_pmt_cxl_req
        tx = body.undrlyg[0].tx_inf[0]
        psid = f"cxl-{uuid.uuid4().hex}"
        settles_at = now + self.config.settlement_delay
        e2e = tx.orgnl_end_to_end_id
        accepted, reason, text, original = self._decide_cancellation(client_id, e2e, now)
        if accepted and original is not None:
            original.cancelled_by = psid
            original.cancel_effective_at = settles_at
            if self._store is not None:
                self._store.save_payment(original)
        record = CancellationRecord(
            payments_service_id=psid,
            client_id=client_id,
            assignment_id=msg.message_id,
            body_hash=body_hash,
            created_at=now,
            settles_at=settles_at,
            assigner_bic=body.assgnmt.assgnr.agt.fin_instn_id.bicfi,
            assignee_bic=body.assgnmt.assgne.agt.fin_instn_id.bicfi,
            cancellation_id=tx.cxl_id,
            original_end_to_end_id=e2e,
            original_payment_id=original.payments_service_id if original else None,
            accepted=accepted,
            reason_code=reason,
            reason_text=text,
        )
        self.cancellations[psid] = record
        self._cancellation_ids[(client_id, msg.message_id)] = psid
        self.stats.cancellations_stored += 1
        if self._store is not None:
            self._store.save_cancellation(record)
        return record, True

    def submit_status_request(
        self, client_id: str, msg: Pacs028, body_hash: str
    ) -> tuple[StatusRequestRecord, bool, CancellationRecord | None] | list[Problem]:
        """Store a pacs.028 on a recall, or find the one stored under its ``grpHdr.msgId``.

        A new one must name a camt.056 of this client (``orgnlMsgNmId``
        ``camt.056.001.08``, ``orgnlMsgId`` its ``assgnmt.id``). When that recall is
        still pending, its decided outcome becomes readable now (as if the beneficiary
        bank answered the chase), and an accepted recall stops its payment now.

        Returns:
            ``(record, created, recall answered now or None)``; or the problems that
            refuse it (400), nothing stored. A replay returns the stored record whatever
            the new body says, as for the other messages.
        """
        replay = self._stored(
            self._status_request_ids, self.status_requests, client_id, msg, body_hash
        )
        if replay is not None:
            return replay, False, None
        tx = msg.fito_fi_pmt_sts_req.tx_inf[0]
        at = "$.fitoFIPmtStsReq.txInf[0].orgnlGrpInf"
        if tx.orgnl_grp_inf.orgnl_msg_nm_id != RECALL_MESSAGE_NAME:
            return [
                Problem(
                    f"{at}.orgnlMsgNmId",
                    f"the service answers status requests on recalls only: must be "
                    f"{RECALL_MESSAGE_NAME!r}",
                )
            ]
        recall_id = self._cancellation_ids.get((client_id, tx.orgnl_grp_inf.orgnl_msg_id))
        if recall_id is None:
            return [
                Problem(
                    f"{at}.orgnlMsgId",
                    "no cancellation request (camt.056) of this client has this assgnmt.id",
                )
            ]
        now = self.now()
        recall = self.cancellations[recall_id]
        chased = not recall.status_at(now).final
        if chased:
            recall.settles_at = now
            original = self.payments.get(recall.original_payment_id or "")
            if recall.accepted and original is not None and original.cancelled_by == recall_id:
                original.cancel_effective_at = now
                self.save(original)
            self.save(recall)
            self.stats.recalls_chased += 1
        record = StatusRequestRecord(
            payments_service_id=f"srq-{uuid.uuid4().hex}",
            client_id=client_id,
            msg_id=msg.message_id,
            body_hash=body_hash,
            created_at=now,
            recall_id=recall_id,
            chased=chased,
        )
        self.status_requests[record.payments_service_id] = record
        self._status_request_ids[(client_id, msg.message_id)] = record.payments_service_id
        self.stats.status_requests_stored += 1
        if self._store is not None:
            self._store.save_status_request(record)
        return record, True, recall if chased else None

    def _decide_cancellation(
        self, client_id: str, e2e: str | None, now: float
    ) -> tuple[bool, str | None, str | None, PaymentRecord | None]:
        ids = self._by_end_to_end.get((client_id, e2e)) if e2e else None
        if not ids:
            return (
                False,
                REASON_NOT_RECEIVED,
                f"Original payment not found: no payment with endToEndId {e2e!r}",
                None,
            )
        candidates = [self.payments[i] for i in reversed(ids)]
        for p in candidates:
            if p.cancelled_by is None and not p.is_processed(now):
                return True, None, None, p
        latest = candidates[0]
        if latest.cancelled_by is not None:
            # Stopped by an earlier accepted cancellation: no money moved.
            return (
                False,
                REASON_ALREADY_CANCELLED,
                f"Original payment already cancelled by {latest.cancelled_by}; "
                "no funds were transferred",
                latest,
            )
        status = latest.status_at(now)
        if status.code != ACCC:
            # Processed, but rejected: the funds never reached the beneficiary.
            return (
                False,
                REASON_ALREADY_CANCELLED,
                f"Original payment was rejected ({status.code} {status.reason}); "
                "no funds were transferred",
                latest,
            )
        return (
            False,
            REASON_PROCESSED,
            "Original payment already processed (ACCC): the funds are with the "
            "beneficiary, who did not agree to return them; request a return (pacs.004)",
            latest,
        )

    def snapshot(self) -> dict[str, Any]:
        """The counters plus sizes of the state (``GET /_sandbox/stats``)."""
        out = self.stats.snapshot()
        out["payments"] = len(self.payments)
        out["cancellations"] = len(self.cancellations)
        out["clients"] = len(self.registry)
        out["active_tokens"] = self.active_tokens
        return out

    # --- reads -----------------------------------------------------------------------

    def messages(self, client_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every stored payment and cancellation with its status now (for inspection).

        Args:
            client_id: only this client's messages, when given.
        """
        now = self.now()
        payments = []
        for p in self.payments.values():
            if client_id is not None and p.client_id != client_id:
                continue
            st = p.status_at(now)
            payments.append(
                {
                    "paymentsServiceId": p.payments_service_id,
                    "clientId": p.client_id,
                    "msgId": p.msg_id,
                    "endToEndId": p.end_to_end_id,
                    "status": st.code,
                    "reason": st.reason,
                    "cancelledBy": p.cancelled_by,
                    "creationDateTime": format_creation_date_time(p.created_at),
                }
            )
        cancellations = []
        for c in self.cancellations.values():
            if client_id is not None and c.client_id != client_id:
                continue
            cs = c.status_at(now)
            cancellations.append(
                {
                    "paymentsServiceId": c.payments_service_id,
                    "clientId": c.client_id,
                    "assignmentId": c.assignment_id,
                    "originalEndToEndId": c.original_end_to_end_id,
                    "originalPaymentsServiceId": c.original_payment_id,
                    "status": cs.conf,
                    "txCxlSts": cs.tx_status,
                    "reason": cs.reason,
                    "creationDateTime": format_creation_date_time(c.created_at),
                }
            )
        return {"payments": payments, "cancellations": cancellations}


STATE_KEY: Final = web.AppKey("payments_async.sandbox.state", SandboxState)


def state_of(request: web.Request) -> SandboxState:
    """The sandbox state of the application serving ``request``."""
    return request.app[STATE_KEY]
