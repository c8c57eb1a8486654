"""Item 4: malformed and hostile input from the caller. Every builder argument and every
message field, given a bad value, gives ValidationError naming that field, and nothing
reaches the service (the sandbox's counters stay at zero)."""

from __future__ import annotations

import re
import string
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments_async import Address, Camt056, Pacs008, PaymentsClient, ValidationError
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import CREDITOR_IBAN, cancellation, credit_transfer
from tests.support.reliability import fast_retry, record

DEFAULT_EXAMPLES = 300
SOAK_EXAMPLES = 5000

# --- oracles (our own, not the library's) ---------------------------------------------

SEPA = string.ascii_letters + string.digits + "/-?:().,'+ "
_SAFE = string.ascii_letters + string.digits + " -?:().,'+"  # SEPA without '/'
_IBAN_RE = re.compile(r"[A-Z]{2}[0-9]{2}[a-zA-Z0-9]{1,30}")
_BIC_RE = re.compile(r"[A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}([A-Z0-9]{3})?")
_UETR_RE = re.compile(r"[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}")
ISO_LIKE_NON_CODES = ("ABC", "ZZZ", "XXX", "XTS", "EUX", "QQQ", "EU", "EURO", "eur", "978")
VALID_IBANS = (CREDITOR_IBAN, "FR1420041010050500013M02606", "NL91ABNA0417164300")


def iban_ok(v: str, *, normalise: bool) -> bool:
    if normalise:
        v = v.replace(" ", "").upper()
    if _IBAN_RE.fullmatch(v) is None:
        return False
    moved = (v[4:] + v[:4]).upper()
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def bic_ok(v: str, *, normalise: bool) -> bool:
    return _BIC_RE.fullmatch(v.strip().upper() if normalise else v) is not None


# --- strategies of bad values -----------------------------------------------------------

hostile_char = st.characters(codec="utf-8").filter(lambda c: c not in SEPA) | st.sampled_from(
    ["\x00", "\n", "\r", "\t", "\x1b", "\u202e", "\u200b", "é", "ß", "€", '"', "<", "\\", ";"]
)


def bad_text(max_len: int, *, empty: bool = True) -> st.SearchStrategy[str]:
    """Overlong, empty, or carrying a control / non-SEPA character."""
    overlong = st.text(alphabet=_SAFE, min_size=max_len + 1, max_size=max_len + 300)
    hostile = st.tuples(
        st.text(alphabet=_SAFE, max_size=(max_len - 1) // 2),
        hostile_char,
        st.text(alphabet=_SAFE, max_size=(max_len - 1) // 2),
    ).map("".join)
    out = overlong | hostile
    return out | st.just("") if empty else out


def bad_id() -> st.SearchStrategy[str]:
    """Bad Max35 identifiers: bad text, or slashes where SEPA forbids them."""
    part = st.text(alphabet=_SAFE, min_size=1, max_size=15)
    slashes = (
        part.map(lambda s: "/" + s)
        | part.map(lambda s: s + "/")
        | st.tuples(part, part).map(lambda t: t[0] + "//" + t[1])
    )
    return bad_text(35) | slashes


def bad_iban(*, normalise: bool) -> st.SearchStrategy[str]:
    wrong_digits = st.tuples(st.sampled_from(VALID_IBANS), st.integers(1, 98)).map(
        lambda t: t[0][:2] + f"{(int(t[0][2:4]) + t[1]) % 100:02d}" + t[0][4:]
    )
    overlong = st.text(alphabet=string.digits, min_size=31, max_size=60).map(lambda s: "DE89" + s)
    junk = st.text(max_size=40)
    return (wrong_digits | overlong | junk).filter(lambda v: not iban_ok(v, normalise=normalise))


def bad_bic(*, normalise: bool, empty: bool = True) -> st.SearchStrategy[str]:
    junk = st.text(max_size=15) | st.text(alphabet=string.ascii_uppercase, max_size=14)
    out = junk.filter(lambda v: not bic_ok(v, normalise=normalise))
    return out if empty else out.filter(bool)


bad_uetr = (
    st.uuids(version=4).map(lambda u: str(u).upper())
    | st.uuids(version=1).map(str)
    | st.uuids(version=4).map(lambda u: u.hex)
    | st.text(max_size=40)
).filter(lambda v: _UETR_RE.fullmatch(v) is None)

_TOO_PRECISE = st.decimals(
    min_value=Decimal("0.001"), max_value=Decimal("999999"), places=6, allow_nan=False
).filter(lambda d: d != d.quantize(Decimal("0.01")))
bad_amount_value = st.one_of(
    st.decimals(max_value=Decimal("-0.01"), allow_nan=False, allow_infinity=False, places=2),
    st.sampled_from([Decimal("0"), Decimal("0.00"), Decimal("-0"), Decimal("0.001")]),
    _TOO_PRECISE,
    st.decimals(min_value=Decimal("1000000000.00"), allow_infinity=False, allow_nan=False),
    st.sampled_from([Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity"), Decimal("sNaN")]),
    st.sampled_from([Decimal("1E+12"), Decimal("9" * 40), Decimal("999999999.991")]),
)


bad_amount = st.one_of(
    bad_amount_value,
    bad_amount_value.map(str),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=20).filter(lambda s: not _is_decimal(s)),
)


def _is_decimal(s: str) -> bool:
    try:
        Decimal(s.strip())
    except ArithmeticError:
        return False
    return True


bad_currency = st.sampled_from(ISO_LIKE_NON_CODES) | st.text(max_size=6).filter(
    lambda s: re.fullmatch(r"[A-Z]{3}", s) is None
)
non_eur = st.sampled_from(["USD", "GBP", "CHF", "JPY", "eur", "EUR ", ""]) | bad_currency
bad_code = st.text(max_size=8)
_good_lines = st.lists(st.text(alphabet=_SAFE, min_size=1, max_size=70), min_size=1, max_size=2)
bad_address = (
    # a hybrid address with more than two lines, or a line that breaks Max70Text
    st.builds(
        Address,
        town=st.just("Berlin"),
        country=st.just("DE"),
        lines=st.lists(
            st.text(alphabet=_SAFE, min_size=1, max_size=70), min_size=3, max_size=6
        ).map(tuple),
    )
    | st.builds(
        Address,
        town=st.just("Berlin"),
        country=st.just("DE"),
        lines=st.lists(bad_text(70, empty=False), min_size=1, max_size=2).map(tuple),
    )
    # lines alone (unstructured), or a structured field that breaks its ISO length
    | st.builds(Address, lines=_good_lines.map(tuple))
    | st.builds(Address, town=bad_text(35), country=st.just("DE"))
    | st.builds(Address, town=st.just("Berlin"), country=st.just("DE"), post_code=bad_text(16))
)
naive_datetime = st.datetimes()

# builder argument -> (bad values, the JSON path prefix the error must name)
PT = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0]"
PACS008_ARGS: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "debtor_name": (bad_text(70), f"{PT}.dbtr.nm"),
    "debtor_iban": (bad_iban(normalise=True), f"{PT}.dbtrAcct.id.othr.id"),
    "debtor_agent_id": (bad_text(35), f"{PT}.dbtrAgt.finInstnId.clrSysMmbId.mmbId"),
    "creditor_name": (bad_text(70), f"{PT}.cdtr.nm"),
    "creditor_iban": (bad_iban(normalise=True), f"{PT}.cdtrAcct.id.othr.id"),
    "creditor_agent_id": (bad_text(35), f"{PT}.cdtrAgt.finInstnId.clrSysMmbId.mmbId"),
    "amount": (bad_amount, f"{PT}.intrBkSttlmAmt.value"),
    "currency": (bad_currency, f"{PT}.intrBkSttlmAmt.ccy"),
    "remittance": (bad_text(140), f"{PT}.rmtInf.ustrd[0]"),
    "message_id": (bad_id(), "$.fitoFICstmrCdtTrf.grpHdr.msgId"),
    "end_to_end_id": (bad_id(), f"{PT}.pmtId.endToEndId"),
    "tx_id": (bad_id(), f"{PT}.pmtId.txId"),
    "uetr": (bad_uetr, f"{PT}.pmtId.uetr"),
    "debtor_address": (bad_address, f"{PT}.dbtr.pstlAdr"),
    "creditor_address": (bad_address, f"{PT}.cdtr.pstlAdr"),
    "debtor_account_name": (bad_text(70), f"{PT}.dbtrAcct.nm"),
    "creditor_account_name": (bad_text(70), f"{PT}.cdtrAcct.nm"),
    "creditor_reference": (bad_text(35), f"{PT}.rmtInf.strd[0].cdtrRefInf.ref"),
    "charge_bearer": (bad_code.filter(lambda s: s not in {"DEBT", "CRED", "SHAR", "SLEV"}), PT),
    "service_level": (bad_text(35), f"{PT}.pmtTpInf.svcLvl[0].prtry"),
    "local_instrument": (bad_text(35, empty=False), f"{PT}.pmtTpInf.lclInstrm.prtry"),
    "created_at": (naive_datetime, "$.fitoFICstmrCdtTrf.grpHdr.creDtTm"),
}
CT = "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0]"
CAMT056_ARGS: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "original_end_to_end_id": (bad_id(), f"{CT}.orgnlEndToEndId"),
    "amount": (bad_amount, f"{CT}.orgnlTxRef.intrBkSttlmAmt.value"),
    "currency": (non_eur.filter(lambda s: s != "EUR"), f"{CT}.orgnlTxRef"),
    "creditor_agent_bic": (bad_bic(normalise=True), f"{CT}.orgnlTxRef.cdtrAgt.finInstnId.bicfi"),
    "creditor_iban": (bad_iban(normalise=True), f"{CT}.orgnlTxRef.cdtrAcct.id.iban"),
    "assigner_bic": (bad_bic(normalise=True), "$.fitoFIPmtCxlReq.assgnmt.assgnr"),
    "assignee_bic": (bad_bic(normalise=True), "$.fitoFIPmtCxlReq.assgnmt.assgne"),
    "reason": (
        bad_code.filter(lambda s: s not in {"DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"}),
        f"{CT}.cxlRsnInf[0].rsn.cd",
    ),
    "originator_name": (bad_text(70), f"{CT}.cxlRsnInf[0].orgtr.nm"),
    "originator_bic": (
        bad_bic(normalise=True, empty=False),
        f"{CT}.cxlRsnInf[0].orgtr.id.orgId.anyBIC",
    ),
    "assignment_id": (bad_id(), "$.fitoFIPmtCxlReq.assgnmt.id"),
    "cancellation_id": (bad_id(), f"{CT}.cxlId"),
    "service_level": (bad_text(35), f"{CT}.orgnlTxRef.pmtTpInf.svcLvl[0].prtry"),
    "created_at": (naive_datetime, "$.fitoFIPmtCxlReq.assgnmt.creDtTm"),
}
BUILDERS: dict[str, tuple[Callable[..., object], dict[str, tuple[Any, str]]]] = {
    "build_credit_transfer": (credit_transfer, PACS008_ARGS),
    "build_cancellation": (lambda **kw: cancellation(kw.pop("oe2e", "E2E1"), **kw), CAMT056_ARGS),
}

EXAMPLES: Counter[str] = Counter()


def _names_field(err: ValidationError, prefix: str) -> bool:
    return any(p == prefix or p.startswith((prefix + ".", prefix + "[")) for p in err.paths)


def _check_builder(data: st.DataObject, label: str) -> None:
    name = data.draw(st.sampled_from(sorted(BUILDERS)), label="builder")
    build, args = BUILDERS[name]
    field = data.draw(st.sampled_from(sorted(args)), label="field")
    strategy, prefix = args[field]
    value = data.draw(strategy, label="value")
    kwargs = {"oe2e": value} if field == "original_end_to_end_id" else {field: value}
    with pytest.raises(ValidationError) as info:
        build(**kwargs)
    assert _names_field(info.value, prefix), (field, value, info.value.paths)
    assert info.value.problems
    assert str(info.value)
    EXAMPLES[label] += 1


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None)
@given(data=st.data())
def test_builders_refuse_bad_arguments(data: st.DataObject) -> None:
    _check_builder(data, "builders (default)")


@pytest.mark.soak
@settings(max_examples=SOAK_EXAMPLES, deadline=None)
@given(data=st.data())
def test_builders_refuse_bad_arguments_soak(data: st.DataObject) -> None:
    _check_builder(data, "builders (soak)")


# --- wrong Python types, one deterministic case each --------------------------------------

_ADDRESS_FIELDS = {"debtor_address", "creditor_address"}
_WRONG_TYPES: tuple[Any, ...] = (123, 1.5, b"bytes", object())
_ADDRESS_TEXT = "Main Street 1"  # a str where an Address is expected
_ADDRESS_LINES = ["Main Street 1", "10115 Berlin"]  # lines where an Address is expected


def _wrong_type_cases() -> list[Any]:
    cases = []
    for name, (_, args) in BUILDERS.items():
        for field in sorted(args):
            if field == "amount":
                continue  # ints are accepted amounts; the other types are in bad_amount
            values = (
                (*_WRONG_TYPES, _ADDRESS_TEXT, _ADDRESS_LINES)
                if field in _ADDRESS_FIELDS
                else _WRONG_TYPES
            )
            for value in values:
                cases.append(
                    pytest.param(name, field, value, id=f"{name}-{field}-{type(value).__name__}")
                )
    return cases


@pytest.mark.parametrize(("builder", "field", "value"), _wrong_type_cases())
def test_builders_refuse_wrong_types(builder: str, field: str, value: object) -> None:
    build, args = BUILDERS[builder]
    kwargs = {"oe2e": value} if field == "original_end_to_end_id" else {field: value}
    with pytest.raises(ValidationError) as info:
        build(**kwargs)
    assert _names_field(info.value, args[field][1]), info.value.paths


@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize(
    "amount",
    ["74741566628628433083882798964.833", "99999999999999999999999999.9950469087", "1E+400"],
)
def test_huge_and_too_precise_amount_gives_validation_error(builder: str, amount: str) -> None:
    """Found by hypothesis in the soak: quantize() overflowed the decimal context."""
    build, args = BUILDERS[builder]
    for value in (amount, Decimal(amount)):
        with pytest.raises(ValidationError) as info:
            build(amount=value)
        assert _names_field(info.value, args["amount"][1])


# --- message fields: a valid message with one field spoiled, sent through the client ----

wrong_type = st.one_of(
    st.integers(min_value=2),
    st.floats(),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
bad_datetime = st.sampled_from(
    ["2024-08-01T08:00:00", "yesterday", "", "2024-13-01T00:00:00Z", "2024-08-01", "Z"]
)
bad_count = st.sampled_from(["2", "0", "x", "-1", "1" * 16, " 1", ""])

# (attribute path, wire path, bad values): the field is replaced on a valid message.
PACS008_FIELDS: tuple[tuple[tuple[str | int, ...], str, st.SearchStrategy[Any]], ...] = (
    (("grp_hdr", "msg_id"), "$.fitoFICstmrCdtTrf.grpHdr.msgId", bad_id()),
    (("grp_hdr", "cre_dt_tm"), "$.fitoFICstmrCdtTrf.grpHdr.creDtTm", bad_datetime),
    (("grp_hdr", "nb_of_txs"), "$.fitoFICstmrCdtTrf.grpHdr.nbOfTxs", bad_count),
    (("grp_hdr", "sttlm_inf", "sttlm_mtd"), "$.fitoFICstmrCdtTrf.grpHdr.sttlmInf", bad_code),
    (("cdt_trf_tx_inf", 0, "pmt_id", "end_to_end_id"), f"{PT}.pmtId.endToEndId", bad_id()),
    (("cdt_trf_tx_inf", 0, "pmt_id", "tx_id"), f"{PT}.pmtId.txId", bad_id()),
    (("cdt_trf_tx_inf", 0, "pmt_id", "uetr"), f"{PT}.pmtId.uetr", bad_uetr),
    (
        ("cdt_trf_tx_inf", 0, "intr_bk_sttlm_amt", "value"),
        f"{PT}.intrBkSttlmAmt.value",
        bad_amount_value | st.floats(),
    ),
    (("cdt_trf_tx_inf", 0, "intr_bk_sttlm_amt", "ccy"), f"{PT}.intrBkSttlmAmt.ccy", bad_currency),
    (("cdt_trf_tx_inf", 0, "chrg_br"), f"{PT}.chrgBr", bad_code),
    (("cdt_trf_tx_inf", 0, "dbtr", "nm"), f"{PT}.dbtr.nm", bad_text(70)),
    (("cdt_trf_tx_inf", 0, "cdtr", "nm"), f"{PT}.cdtr.nm", bad_text(70)),
    (
        ("cdt_trf_tx_inf", 0, "cdtr_acct", "id", "othr", "id"),
        f"{PT}.cdtrAcct.id.othr.id",
        bad_iban(normalise=False),
    ),
    (
        ("cdt_trf_tx_inf", 0, "dbtr_agt", "fin_instn_id", "clr_sys_mmb_id", "mmb_id"),
        f"{PT}.dbtrAgt.finInstnId.clrSysMmbId.mmbId",
        bad_text(35),
    ),
)
CAMT056_FIELDS: tuple[tuple[tuple[str | int, ...], str, st.SearchStrategy[Any]], ...] = (
    (("assgnmt", "id"), "$.fitoFIPmtCxlReq.assgnmt.id", bad_id()),
    (("assgnmt", "cre_dt_tm"), "$.fitoFIPmtCxlReq.assgnmt.creDtTm", bad_datetime),
    (
        ("assgnmt", "assgnr", "agt", "fin_instn_id", "bicfi"),
        "$.fitoFIPmtCxlReq.assgnmt.assgnr.agt.finInstnId.bicfi",
        bad_bic(normalise=False),
    ),
    (("ctrl_data", "nb_of_txs"), "$.fitoFIPmtCxlReq.ctrlData.nbOfTxs", bad_count),
    (("undrlyg", 0, "tx_inf", 0, "cxl_id"), f"{CT}.cxlId", bad_id()),
    (("undrlyg", 0, "tx_inf", 0, "orgnl_end_to_end_id"), f"{CT}.orgnlEndToEndId", bad_id()),
    (
        ("undrlyg", 0, "tx_inf", 0, "cxl_rsn_inf", 0, "rsn", "cd"),
        f"{CT}.cxlRsnInf[0].rsn.cd",
        bad_code.filter(lambda s: s not in {"DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"}),
    ),
    (
        ("undrlyg", 0, "tx_inf", 0, "orgnl_tx_ref", "intr_bk_sttlm_amt", "value"),
        f"{CT}.orgnlTxRef.intrBkSttlmAmt.value",
        bad_amount_value | st.floats(),
    ),
    (
        ("undrlyg", 0, "tx_inf", 0, "orgnl_tx_ref", "intr_bk_sttlm_amt", "ccy"),
        f"{CT}.orgnlTxRef.intrBkSttlmAmt.ccy",
        non_eur.filter(lambda s: s != "EUR"),
    ),
    (
        ("undrlyg", 0, "tx_inf", 0, "orgnl_tx_ref", "cdtr_acct", "id", "iban"),
        f"{CT}.orgnlTxRef.cdtrAcct.id.iban",
        bad_iban(normalise=False),
    ),
    (
        ("undrlyg", 0, "tx_inf", 0, "orgnl_tx_ref", "cdtr_agt", "fin_instn_id", "bicfi"),
        f"{CT}.orgnlTxRef.cdtrAgt.finInstnId.bicfi",
        bad_bic(normalise=False),
    ),
)


def replace_at(obj: Any, path: tuple[str | int, ...], value: object) -> Any:
    """A copy of ``obj`` with the field at ``path`` replaced (structs are not mutated)."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(obj)
        items[head] = replace_at(items[head], rest, value) if rest else value
        return items
    child = replace_at(getattr(obj, head), rest, value) if rest else value
    return msgspec.structs.replace(obj, **{head: child})


def spoil(msg: Pacs008 | Camt056, path: tuple[str | int, ...], value: object) -> Any:
    root = "fito_fi_cstmr_cdt_trf" if isinstance(msg, Pacs008) else "fito_fi_pmt_cxl_req"
    return replace_at(msg, (root, *path), value)


@pytest_asyncio.fixture
async def idle_sandbox() -> AsyncIterator[tuple[SandboxHandle, PaymentsClient]]:
    async with sandbox_server(SandboxConfig()) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url, **fast_retry()) as c:
            yield sb, c
        stats = sb.server.stats()
        # Nothing reached the service: no token request, no API request at all.
        assert stats["requests"] == {}, stats["requests"]
        assert stats["token_requests"] == 0


async def _check_message(
    data: st.DataObject, sb: SandboxHandle, client: PaymentsClient, label: str
) -> None:
    kind = data.draw(st.sampled_from(["pacs008", "camt056"]), label="message")
    fields = PACS008_FIELDS if kind == "pacs008" else CAMT056_FIELDS
    path, wire, strategy = data.draw(st.sampled_from(fields), label="field")
    value = data.draw(strategy | wrong_type, label="value")
    msg = credit_transfer() if kind == "pacs008" else cancellation(str(uuid.uuid4().hex[:20]))
    bad = spoil(msg, path, value)
    submit = client.submit_credit_transfer if kind == "pacs008" else client.request_cancellation
    with pytest.raises(ValidationError) as info:
        await submit(bad)
    assert _names_field(info.value, wire), (wire, value, info.value.paths)
    assert sb.server.stats()["requests"] == {}
    EXAMPLES[label] += 1


@settings(
    max_examples=DEFAULT_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
async def test_client_refuses_spoiled_messages_before_sending(
    data: st.DataObject, idle_sandbox: tuple[SandboxHandle, PaymentsClient]
) -> None:
    await _check_message(data, *idle_sandbox, "message fields via client (default)")


@pytest.mark.soak
@settings(
    max_examples=SOAK_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
async def test_client_refuses_spoiled_messages_before_sending_soak(
    data: st.DataObject, idle_sandbox: tuple[SandboxHandle, PaymentsClient]
) -> None:
    await _check_message(data, *idle_sandbox, "message fields via client (soak)")


@pytest.fixture(scope="module", autouse=True)
def _report_example_counts() -> Iterator[None]:
    """After the module's tests: how many hypothesis examples ran, by outcome."""
    yield
    if EXAMPLES:
        record(
            "bad input from the caller: examples", total=sum(EXAMPLES.values()), **dict(EXAMPLES)
        )
