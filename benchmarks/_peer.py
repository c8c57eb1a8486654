"""The peer baseline: this client written the way most projects would write it.

httpx.AsyncClient, PyJWT (the private key loaded once, as an object), pydantic v2 models
with camelCase aliases, and ``json=`` to send. Nothing from ``payments_async`` is used
here, on purpose: this is the code a team writes from the service's documentation.

One choice had to be made: the SCA token's ``hd`` claim is the SHA-256 of the exact body
bytes, but with ``json=`` httpx serializes the payload itself. A typical project then
serializes twice: ``json.dumps`` of ``model_dump()`` with httpx's own settings (compact
separators, ``ensure_ascii=False``) to hash, and ``json=payload`` to send, so both
produce the same bytes. That is what ``request_cancellation`` does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import jwt
from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

TOKEN_PATH = "/oauth/token"
CAMT056_PATH = "/payments/camt056/v08"
CAMT029_PATH = "/payments/camt029/v09"
PACS002_PATH = "/payments/pacs002/v12"
BIC_PATTERN = r"^[A-Z]{6}[A-Z2-9][A-NP-Z0-9]([A-Z0-9]{3})?$"


class IsoModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# --- camt.056 (what we send) ---------------------------------------------------------------


class FinInstnId(IsoModel):
    bicfi: str = Field(alias="bicfi", pattern=BIC_PATTERN)


class Agent(IsoModel):
    fin_instn_id: FinInstnId


class Party(IsoModel):
    agt: Agent


class Assignment(IsoModel):
    id: str = Field(max_length=35)
    assgnr: Party
    assgne: Party
    cre_dt_tm: str


class CtrlData(IsoModel):
    nb_of_txs: str


class OrgId(IsoModel):
    any_bic: str = Field(alias="anyBIC", pattern=BIC_PATTERN)


class OrgtrId(IsoModel):
    org_id: OrgId


class Orgtr(IsoModel):
    nm: str | None = Field(default=None, max_length=140)
    id: OrgtrId | None = None


class Rsn(IsoModel):
    cd: str = Field(max_length=4)


class CxlRsnInf(IsoModel):
    orgtr: Orgtr | None = None
    rsn: Rsn


class Amount(IsoModel):
    value: Decimal = Field(gt=0, decimal_places=2)
    ccy: str = Field(pattern=r"^[A-Z]{3}$")

    @field_serializer("value", when_used="json")
    def _as_number(self, v: Decimal) -> float:
        return float(v)  # the service wants a JSON number


class SvcLvl(IsoModel):
    prtry: str


class PmtTpInf(IsoModel):
    svc_lvl: list[SvcLvl]


class AcctId(IsoModel):
    iban: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$")


class Acct(IsoModel):
    id: AcctId
    ccy: str | None = None


class OrgnlTxRef(IsoModel):
    intr_bk_sttlm_amt: Amount | None = None
    pmt_tp_inf: PmtTpInf | None = None
    cdtr_agt: Agent | None = None
    cdtr_acct: Acct | None = None


class TxInf(IsoModel):
    cxl_id: str = Field(max_length=35)
    orgnl_end_to_end_id: str = Field(max_length=35)
    cxl_rsn_inf: list[CxlRsnInf] = Field(min_length=1)
    orgnl_tx_ref: OrgnlTxRef


class Undrlyg(IsoModel):
    tx_inf: list[TxInf] = Field(min_length=1)


class CxlReq(IsoModel):
    assgnmt: Assignment
    ctrl_data: CtrlData
    undrlyg: list[Undrlyg] = Field(min_length=1)


class Camt056Request(IsoModel):
    fito_fi_pmt_cxl_req: CxlReq = Field(alias="fitoFIPmtCxlReq")


def build_camt056(
    *,
    assignment_id: str,
    original_end_to_end_id: str,
    amount: Decimal,
    creditor_agent_bic: str,
    creditor_iban: str,
    assigner_bic: str,
    assignee_bic: str,
    reason: str = "CUST",
) -> Camt056Request:
    """A camt.056 as a typical project builds it: nested pydantic models, validated."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return Camt056Request(
        fito_fi_pmt_cxl_req=CxlReq(
            assgnmt=Assignment(
                id=assignment_id,
                assgnr=Party(agt=Agent(fin_instn_id=FinInstnId(bicfi=assigner_bic))),
                assgne=Party(agt=Agent(fin_instn_id=FinInstnId(bicfi=assignee_bic))),
                cre_dt_tm=now,
            ),
            ctrl_data=CtrlData(nb_of_txs="1"),
            undrlyg=[
                Undrlyg(
                    tx_inf=[
                        TxInf(
                            cxl_id=f"CXL{uuid.uuid4().hex}"[:35],
                            orgnl_end_to_end_id=original_end_to_end_id,
                            cxl_rsn_inf=[
                                CxlRsnInf(
                                    orgtr=Orgtr(id=OrgtrId(org_id=OrgId(any_bic=assigner_bic))),
                                    rsn=Rsn(cd=reason),
                                )
                            ],
                            orgnl_tx_ref=OrgnlTxRef(
                                intr_bk_sttlm_amt=Amount(value=amount, ccy="EUR"),
                                pmt_tp_inf=PmtTpInf(svc_lvl=[SvcLvl(prtry="SEPA")]),
                                cdtr_agt=Agent(fin_instn_id=FinInstnId(bicfi=creditor_agent_bic)),
                                cdtr_acct=Acct(id=AcctId(iban=creditor_iban), ccy="EUR"),
                            ),
                        )
                    ]
                )
            ],
        )
    )


# --- what we read -------------------------------------------------------------------------


class SubmissionResult(IsoModel):
    payments_service_id: str
    payment_id: str | None = None
    status: str | None = None
    creation_date_time: str | None = None


class SubmissionEnvelope(IsoModel):
    data: SubmissionResult


class TokenResponse(BaseModel):
    access_token: str
    token_type: str
    expires_in: int
    scope: str | None = None


class OrgnlGrpInfAndSts(IsoModel):
    orgnl_msg_id: str | None = None
    orgnl_msg_nm_id: str | None = None


class OrgnlTx(IsoModel):
    orgnl_end_to_end_id: str | None = None
    orgnl_tx_id: str | None = None


class OrgnlPmtInfAndSts(IsoModel):
    orgnl_pmt_inf_id: str | None = None
    tx_inf_and_sts: list[OrgnlTx] = []


class CxlStsRsn(IsoModel):
    cd: str | None = None
    prtry: str | None = None


class CxlStsRsnInf(IsoModel):
    rsn: CxlStsRsn | None = None
    addtl_inf: list[str | None] | None = None


class TxCxlSts(IsoModel):
    cxl_sts_id: str | None = None
    orgnl_end_to_end_id: str | None = None
    tx_cxl_sts: str | None = None
    cxl_sts_rsn_inf: list[CxlStsRsnInf] | None = None


class CxlDtls(IsoModel):
    orgnl_grp_inf_and_sts: OrgnlGrpInfAndSts | None = None
    orgnl_pmt_inf_and_sts: list[OrgnlPmtInfAndSts] | None = None
    tx_inf_and_sts: list[TxCxlSts] = []


class Sts(IsoModel):
    conf: str | None = None


class ResAssignment(IsoModel):
    id: str
    assgnr: Party | None = None
    assgne: Party | None = None
    cre_dt_tm: str | None = None


class Resolution(IsoModel):
    assgnmt: ResAssignment
    sts: Sts | None = None
    cxl_dtls: list[CxlDtls] = []


class Camt029Response(IsoModel):
    rsltn_of_invstgtn: Resolution


class StsRsn(IsoModel):
    cd: str | None = None


class StsRsnInf(IsoModel):
    rsn: StsRsn | None = None
    addtl_inf: list[str | None] | None = None


class TxInfAndSts(IsoModel):
    orgnl_end_to_end_id: str | None = None
    orgnl_tx_id: str | None = None
    orgnl_uetr: str | None = None
    tx_sts: str | None = None
    sts_rsn_inf: list[StsRsnInf] | None = None
    accptnc_dt_tm: str | None = None


class GrpHdr(IsoModel):
    msg_id: str | None = None
    cre_dt_tm: str | None = None


class StsRpt(IsoModel):
    grp_hdr: GrpHdr | None = None
    orgnl_grp_inf_and_sts: OrgnlGrpInfAndSts | None = None
    tx_inf_and_sts: list[TxInfAndSts] = []


class Pacs002Response(IsoModel):
    fito_fi_pmt_sts_rpt: StsRpt = Field(alias="fitoFIPmtStsRpt")


# --- the client ------------------------------------------------------------------------------


class PeerClient:
    """A payments client in the style of most projects: httpx + PyJWT + pydantic."""

    def __init__(
        self,
        base_url: str,
        *,
        client_id: str,
        client_secret: str,
        kid: str,
        issuer: str,
        private_key: Any,
        max_connections: int = 100,
    ) -> None:
        self.client_id = client_id
        self.kid = kid
        self.issuer = issuer
        self.private_key = private_key  # loaded once, as an object
        self._http = httpx.AsyncClient(
            base_url=base_url,
            auth=None,
            timeout=30.0,
            limits=httpx.Limits(max_connections=max_connections),
        )
        self._basic = httpx.BasicAuth(client_id, client_secret)
        self._token: str | None = None
        self._token_expires = 0.0
        self._lock = asyncio.Lock()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _access_token(self) -> str:
        if self._token and time.time() < self._token_expires - 60:
            return self._token
        async with self._lock:
            if self._token and time.time() < self._token_expires - 60:
                return self._token
            now = int(time.time())
            assertion = jwt.encode(
                {
                    "iss": self.issuer,
                    "sub": self.client_id,
                    "iat": now,
                    "nbf": now,
                    "exp": now + 300,
                    "jti": str(uuid.uuid4()),
                },
                self.private_key,
                algorithm="RS256",
                headers={"kid": self.kid},
            )
            r = await self._http.post(
                TOKEN_PATH,
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    "assertion": assertion,
                    "scope": "makePayments",
                },
                auth=self._basic,
                headers={"Accept": "application/json"},
            )
            r.raise_for_status()
            tok = TokenResponse.model_validate(r.json())
            self._token = tok.access_token
            self._token_expires = time.time() + tok.expires_in
            return self._token

    def _sca_token(self, body: bytes, payment_id: str) -> str:
        now = int(time.time())
        return jwt.encode(
            {
                "iss": self.issuer,
                "iat": now,
                "nbf": now,
                "exp": now + 180,
                "jti": str(uuid.uuid4()),
                "alg": "SHA256",
                "hd": base64.b64encode(hashlib.sha256(body).digest()).decode(),
                "nonce": str(uuid.uuid4()),
                "payment_id": payment_id,
            },
            self.private_key,
            algorithm="RS256",
            headers={"kid": self.kid},
        )

    async def request_cancellation(self, req: Camt056Request) -> SubmissionResult:
        payload = req.model_dump(mode="json", by_alias=True, exclude_none=True)
        # httpx's json= encoding, reproduced so that hd matches the bytes it will send.
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        token = await self._access_token()
        r = await self._http.post(
            CAMT056_PATH,
            json=payload,
            headers={
                "Authorization": f"Bearer {token}",
                "X-Service-Client-Id": self.client_id,
                "Accept": "application/json",
                "sca-token": self._sca_token(body, req.fito_fi_pmt_cxl_req.assgnmt.id),
                "X-Request-ID": str(uuid.uuid4()),
            },
        )
        r.raise_for_status()
        return SubmissionEnvelope.model_validate(r.json()).data

    async def _get(self, path: str) -> Any:
        token = await self._access_token()
        r = await self._http.get(
            path,
            headers={
                "Authorization": f"Bearer {token}",
                "X-Service-Client-Id": self.client_id,
                "Accept": "application/json",
                "X-Request-ID": str(uuid.uuid4()),
            },
        )
        r.raise_for_status()
        return r.json()

    async def get_cancellation_outcome(self, payments_service_id: str) -> Camt029Response:
        data = await self._get(f"{CAMT029_PATH}/{payments_service_id}")
        return Camt029Response.model_validate(data)

    async def get_credit_transfer_status(self, payments_service_id: str) -> Pacs002Response:
        data = await self._get(f"{PACS002_PATH}/{payments_service_id}")
        return Pacs002Response.model_validate(data)
