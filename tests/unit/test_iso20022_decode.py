"""Decoding: wire names as in the spec, tolerant inbound, strict outbound, our errors only."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async import PaymentsError, ValidationError
from payments_async.iso20022 import (
    decode_camt029,
    decode_camt056,
    decode_pacs002,
    decode_pacs008,
    encode,
)
from payments_async.iso20022.pacs002 import _decode_tolerant

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DECODERS: list[Callable[[bytes], object]] = [
    decode_pacs008,
    decode_camt056,
    decode_pacs002,
    decode_camt029,
]


def paths(text: str) -> list[str]:
    return text.split()


# The spec's table for pacs.008, path for path.
PACS008_SPEC_PATHS = paths("""
grpHdr.msgId grpHdr.creDtTm grpHdr.nbOfTxs grpHdr.sttlmInf.sttlmMtd
cdtTrfTxInf[].pmtId.endToEndId cdtTrfTxInf[].pmtId.txId cdtTrfTxInf[].pmtId.uetr
cdtTrfTxInf[].pmtTpInf.svcLvl[].prtry cdtTrfTxInf[].pmtTpInf.lclInstrm.prtry
cdtTrfTxInf[].intrBkSttlmAmt.value cdtTrfTxInf[].intrBkSttlmAmt.ccy cdtTrfTxInf[].chrgBr
cdtTrfTxInf[].dbtr.nm cdtTrfTxInf[].dbtr.pstlAdr.adrLine[] cdtTrfTxInf[].dbtrAcct.id.othr.id
cdtTrfTxInf[].dbtrAcct.nm cdtTrfTxInf[].dbtrAgt.finInstnId.clrSysMmbId.mmbId
cdtTrfTxInf[].cdtrAgt.finInstnId.clrSysMmbId.mmbId cdtTrfTxInf[].cdtr.nm
cdtTrfTxInf[].cdtr.pstlAdr.adrLine[] cdtTrfTxInf[].cdtrAcct.id.othr.id cdtTrfTxInf[].cdtrAcct.nm
cdtTrfTxInf[].rmtInf.ustrd[] cdtTrfTxInf[].rmtInf.strd[].cdtrRefInf.ref
cdtTrfTxInf[].rmtInf.strd[].addtlRmtInf[]
""") + paths("""
cdtTrfTxInf[].dbtr.pstlAdr.strtNm cdtTrfTxInf[].dbtr.pstlAdr.bldgNb
cdtTrfTxInf[].dbtr.pstlAdr.pstCd cdtTrfTxInf[].dbtr.pstlAdr.twnNm cdtTrfTxInf[].dbtr.pstlAdr.ctry
cdtTrfTxInf[].cdtr.pstlAdr.pstCd cdtTrfTxInf[].cdtr.pstlAdr.twnNm cdtTrfTxInf[].cdtr.pstlAdr.ctry
""")  # ISO PostalAddress24 fields by the naming rule: the EPC rule asks town and country

# The spec's table for camt.056 (with assgnmt.id for its "{base_url}" row).
CAMT056_SPEC_PATHS = paths("""
assgnmt.id assgnmt.assgnr.agt.finInstnId.bicfi assgnmt.assgne.agt.finInstnId.bicfi
assgnmt.creDtTm undrlyg[].txInf[].cxlId undrlyg[].txInf[].orgnlEndToEndId
undrlyg[].txInf[].cxlRsnInf[].orgtr.nm undrlyg[].txInf[].cxlRsnInf[].orgtr.id.orgId.anyBIC
undrlyg[].txInf[].cxlRsnInf[].rsn.cd undrlyg[].txInf[].orgnlTxRef.intrBkSttlmAmt.value
undrlyg[].txInf[].orgnlTxRef.intrBkSttlmAmt.ccy
undrlyg[].txInf[].orgnlTxRef.pmtTpInf.svcLvl[].prtry
undrlyg[].txInf[].orgnlTxRef.cdtrAgt.finInstnId.bicfi
undrlyg[].txInf[].orgnlTxRef.cdtrAgt.finInstnId.pstlAdr.twnNm
undrlyg[].txInf[].orgnlTxRef.cdtrAgt.finInstnId.pstlAdr.ctry
undrlyg[].txInf[].orgnlTxRef.cdtrAgt.finInstnId.pstlAdr.adrLine[]
undrlyg[].txInf[].orgnlTxRef.cdtrAcct.id.iban undrlyg[].txInf[].orgnlTxRef.cdtrAcct.ccy
ctrlData.nbOfTxs
""")  # ctrlData.nbOfTxs: optional, named by the issue (ISO camt.056 control data)

CAMT029_SPEC_PATHS = paths("""
assgnmt.id assgnmt.assgnr.agt.finInstnId.bicfi assgnmt.assgne.agt.finInstnId.bicfi
assgnmt.creDtTm sts.conf cxlDtls[].orgnlGrpInfAndSts.orgnlMsgId
cxlDtls[].orgnlGrpInfAndSts.orgnlMsgNmId cxlDtls[].orgnlPmtInfAndSts[].orgnlPmtInfId
cxlDtls[].orgnlPmtInfAndSts[].txInfAndSts[].orgnlEndToEndId cxlDtls[].txInfAndSts[].cxlStsId
cxlDtls[].txInfAndSts[].txCxlSts cxlDtls[].txInfAndSts[].cxlStsRsnInf[].addtlInf[]
""")


def leaf_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaf_paths(value, f"{prefix}.{key}" if prefix else key)
    elif isinstance(node, list):
        for item in node:
            yield from leaf_paths(item, f"{prefix}[]")
    else:
        yield prefix


@pytest.mark.parametrize(
    ("fixture", "decode", "root", "spec_paths"),
    [
        ("pacs008_credit_transfer.json", decode_pacs008, "fitoFICstmrCdtTrf", PACS008_SPEC_PATHS),
        (
            "camt056_cancellation_request.json",
            decode_camt056,
            "fitoFIPmtCxlReq",
            CAMT056_SPEC_PATHS,
        ),
        ("camt029_resolution.json", decode_camt029, "rsltnOfInvstgtn", CAMT029_SPEC_PATHS),
    ],
)
def test_encoded_wire_names_are_exactly_the_spec_paths(
    fixture: str, decode: Callable[[bytes], object], root: str, spec_paths: list[str]
) -> None:
    wire = msgspec.json.decode(encode(decode((FIXTURES / fixture).read_bytes())))
    assert list(wire) == [root]
    assert set(leaf_paths(wire[root])) == set(spec_paths)


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize(
    "data", [b"", b"{", b"not json", b"[]", b"null", b'{"x": 1}', b"\xff\xfe", b'"text"']
)
def test_malformed_input_raises_our_validation_error(
    decode: Callable[[bytes], object], data: bytes
) -> None:
    with pytest.raises(ValidationError) as info:
        decode(data)
    assert isinstance(info.value, PaymentsError)
    assert not isinstance(info.value, msgspec.MsgspecError)
    assert info.value.problems
    assert isinstance(info.value.__cause__, msgspec.MsgspecError | type(None))


def test_wrong_type_names_the_wire_path() -> None:
    with pytest.raises(ValidationError) as info:
        decode_pacs008(b'{"fitoFICstmrCdtTrf": {"grpHdr": {"msgId": 7}}}')
    assert info.value.paths == ("$.fitoFICstmrCdtTrf.grpHdr.msgId",)


def test_outbound_decoding_is_strict() -> None:
    data = (FIXTURES / "pacs008_credit_transfer.json").read_bytes()
    with pytest.raises(ValidationError) as info:
        decode_pacs008(data.replace(b'"chrgBr"', b'"unexpected": 1, "chrgBr"'))
    assert "unexpected" in str(info.value)
    assert info.value.paths == ("$.fitoFICstmrCdtTrf.cdtTrfTxInf[0]",)


def test_inbound_decoding_ignores_unknown_fields() -> None:
    data = (FIXTURES / "camt029_resolution.json").read_bytes()
    extended = data.replace(b'"sts"', b'"vendor": {"x": [1]}, "sts"')
    assert extended != data
    assert decode_camt029(extended) == decode_camt029(data)


@pytest.mark.parametrize("root", ["fitoFIPmtStsRpt", "fIToFIPmtStsRpt", "FITOFIPMTSTSRPT"])
def test_pacs002_root_is_matched_case_insensitively(root: str) -> None:
    report = decode_pacs002(b'{"%s": {"txInfAndSts": [{"txSts": "PEND"}]}}' % root.encode())
    assert report.fito_fi_pmt_sts_rpt.tx_inf_and_sts[0].tx_sts == "PEND"
    assert encode(report) == b'{"fitoFIPmtStsRpt":{"txInfAndSts":[{"txSts":"PEND"}]}}'


def test_pacs002_single_transaction_object_becomes_a_list() -> None:
    report = decode_pacs002(b'{"fitoFIPmtStsRpt": {"txInfAndSts": {"txSts": "ACCC"}}}')
    txs = report.fito_fi_pmt_sts_rpt.tx_inf_and_sts
    assert isinstance(txs, list)
    assert [t.tx_sts for t in txs] == ["ACCC"]


def test_pacs002_without_transactions_has_an_empty_list() -> None:
    assert decode_pacs002(b'{"fitoFIPmtStsRpt": {}}').fito_fi_pmt_sts_rpt.tx_inf_and_sts == []


def test_pacs002_error_inside_other_root_spelling_names_that_key() -> None:
    with pytest.raises(ValidationError) as info:
        decode_pacs002(b'{"fIToFIPmtStsRpt": {"txInfAndSts": [{"txSts": 1}]}}')
    assert info.value.paths == ("$.fIToFIPmtStsRpt.txInfAndSts[0].txSts",)


_TX = st.fixed_dictionaries(
    {},
    optional={
        "txSts": st.sampled_from(["ACCC", "RJCT", "PDNG", 1, None]),
        "orgnlEndToEndId": st.text(max_size=5),
        "stsRsnInf": st.lists(
            st.fixed_dictionaries(
                {}, optional={"addtlInf": st.lists(st.none() | st.text(max_size=3), max_size=2)}
            ),
            max_size=2,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    root=st.sampled_from(["fitoFIPmtStsRpt", "fIToFIPmtStsRpt", "other"]),
    txs=st.none() | _TX | st.lists(_TX, max_size=3) | st.just("x"),
    grp=st.none() | st.fixed_dictionaries({"msgId": st.text(max_size=4)}),
)
def test_pacs002_one_pass_decoding_reads_exactly_what_the_tolerant_path_reads(
    root: str, txs: object, grp: object
) -> None:
    # The service's own shape is decoded in one pass; every document must give the same
    # report, or the same error, as the tolerant path alone.
    body: dict[str, object] = {"grpHdr": grp} if grp is not None else {}
    if txs is not None:
        body["txInfAndSts"] = txs
    data = msgspec.json.encode({root: body})
    try:
        expected: object = _decode_tolerant(data)
    except ValidationError as exc:
        expected = (exc.message, exc.paths)
    try:
        got: object = decode_pacs002(data)
    except ValidationError as exc:
        got = (exc.message, exc.paths)
    assert got == expected


def test_pacs002_missing_root_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        decode_pacs002(b'{"somethingElse": {}}')
    assert info.value.paths == ("$.fitoFIPmtStsRpt",)


def test_camt056_both_spellings_when_both_present_keep_the_sample_spelling() -> None:
    data = (FIXTURES / "camt056_cancellation_request.json").read_bytes()
    both = data.replace(
        b'"pmtTpInf": {"svcLvl"',
        b'"intrBkSttlAmt": {"value": 9.99, "ccy": "EUR"}, "pmtTpInf": {"svcLvl"',
    )
    assert both != data
    msg = decode_camt056(both)
    ref = msg.fito_fi_pmt_cxl_req.undrlyg[0].tx_inf[0].orgnl_tx_ref
    assert ref.intr_bk_sttlm_amt is not None
    assert str(ref.intr_bk_sttlm_amt.value) == "1234.10"
    assert b"intrBkSttlAmt" not in encode(msg)


def test_amounts_decode_as_exact_decimals() -> None:
    msg = decode_pacs008((FIXTURES / "pacs008_credit_transfer.json").read_bytes())
    value = msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].intr_bk_sttlm_amt.value
    assert repr(value) == "Decimal('1234.10')"


def test_no_field_name_is_left_in_snake_case_on_the_wire() -> None:
    wire = encode(decode_camt056((FIXTURES / "camt056_cancellation_request.json").read_bytes()))
    assert re.search(rb'"[a-z]+_[a-z_]+"', wire) is None
