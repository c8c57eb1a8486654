"""ISO 20022 simple types as annotated aliases; ``_validate`` reads their ``iso_type`` tag."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

import msgspec

__all__ = [
    "AddressLines",
    "Amount",
    "BicFi",
    "CancellationReasonCode",
    "ChargeBearerCode",
    "CountryCode",
    "CurrencyCode",
    "Iban",
    "IsoDate",
    "IsoDateTime",
    "Lei",
    "Max4Text",
    "Max16Text",
    "Max35Id",
    "Max35Text",
    "Max70Text",
    "Max140Text",
    "NbOfTxs",
    "PartyName",
    "SettlementMethodCode",
    "Uetr",
    "UtcDateTime",
]

# The constraints are deliberately NOT msgspec constraints (min_length, pattern, ...):
# those would stop decoding at the first bad field, while ``validate()`` must report every
# problem at once. Each alias carries its ISO type name in ``Meta.extra["iso_type"]``;
# ``_validate.RULES`` maps that name to one check. Lists carry ``min_items``/``max_items``.


def _tag(iso_type: str, description: str) -> msgspec.Meta:
    return msgspec.Meta(description=description, extra={"iso_type": iso_type})


Max4Text = Annotated[str, _tag("Max4Text", "ISO Max4Text: 1..4 SEPA characters")]
"""1..4 characters of the SEPA character set (external codes such as a purpose code)."""

Max16Text = Annotated[str, _tag("Max16Text", "ISO Max16Text: 1..16 SEPA characters")]
"""1..16 characters of the SEPA character set (building number, post box, post code)."""

Max35Text = Annotated[str, _tag("Max35Text", "ISO Max35Text: 1..35 SEPA characters")]
"""1..35 characters of the SEPA character set (codes, member ids, town and district names)."""

Max35Id = Annotated[
    str, _tag("Max35Id", "ISO Max35Text identifier: SEPA characters, no leading/trailing '/'")
]
"""A Max35Text identifier (msgId, endToEndId, txId, cxlId, assgnmt.id): SEPA slash rules."""

Max70Text = Annotated[str, _tag("Max70Text", "ISO Max70Text: 1..70 SEPA characters")]
"""1..70 characters of the SEPA character set (street names, address lines)."""

Max140Text = Annotated[str, _tag("Max140Text", "ISO Max140Text: 1..140 SEPA characters")]
"""1..140 characters of the SEPA character set (names, remittance lines)."""

PartyName = Annotated[
    str, _tag("PartyName", "ISO Max140Text; a party's name, 1..70 SEPA characters (EPC IGs)")
]
"""A party's name (debtor, creditor, ultimate parties, originator): ISO allows 140
characters, the EPC implementation guidelines limit a name to 70."""

Lei = Annotated[str, _tag("Lei", "LEI (ISO 17442): [A-Z0-9]{18}[0-9]{2}, mod-97 check")]
"""A Legal Entity Identifier: 20 characters whose two last digits are an ISO 7064
mod-97 check, as an IBAN's."""

BicFi = Annotated[str, _tag("BicFi", "BICFI: [A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}([A-Z0-9]{3})?")]
"""A financial institution's BIC, 8 or 11 characters."""

Iban = Annotated[str, _tag("Iban", "IBAN (ISO 13616), pattern plus mod-97 check")]
"""An IBAN without spaces; the mod-97 check digits must hold."""

Uetr = Annotated[str, _tag("Uetr", "UETR: lowercase UUID version 4")]
"""Unique end-to-end transaction reference: a lowercase UUID v4."""

CurrencyCode = Annotated[str, _tag("CurrencyCode", "ISO 4217 alphabetic currency code")]
"""An active ISO 4217 currency code such as ``EUR``."""

CountryCode = Annotated[str, _tag("CountryCode", "ISO 3166 alpha-2 country code")]
"""Two upper-case letters."""

Amount = Annotated[Decimal, _tag("Amount", "Decimal amount, written as a JSON number")]
"""Money: a finite ``Decimal``; the range rule depends on the currency beside it."""

UtcDateTime = Annotated[str, _tag("UtcDateTime", "ISO 8601 date-time with UTC designator Z")]
"""An ISO 8601 date-time ending in ``Z`` (``grpHdr.creDtTm``)."""

IsoDate = Annotated[str, _tag("IsoDate", "ISO 8601 calendar date YYYY-MM-DD")]
"""An ISO 8601 calendar date such as ``2026-11-24`` (``intrBkSttlmDt``)."""

IsoDateTime = Annotated[str, _tag("IsoDateTime", "ISO 8601 date-time with offset")]
"""An ISO 8601 date-time with a zone designator or offset."""

NbOfTxs = Annotated[str | int, _tag("NbOfTxs", "Number of transactions: [0-9]{1,15}")]
"""Count of transactions; sent as a string, a JSON number is accepted when decoding."""

SettlementMethodCode = Annotated[str, _tag("SettlementMethodCode", "INDA, INGA, COVE or CLRG")]
"""ISO settlement method; SEPA uses ``CLRG``."""

ChargeBearerCode = Annotated[str, _tag("ChargeBearerCode", "DEBT, CRED, SHAR or SLEV")]
"""ISO charge bearer; SEPA uses ``SLEV``."""

CancellationReasonCode = Annotated[
    str, _tag("CancellationReasonCode", "SEPA recall reason: DUPL, TECH, FRAD, AC03, AM09, CUST")
]
"""Reason of a cancellation request, from the SEPA recall set."""

AddressLines = Annotated[
    list[Max70Text], msgspec.Meta(description="At most 7 lines (ISO)", extra={"max_items": 7})
]
"""Postal address lines: Max70Text each, at most seven (ISO); the EPC address rule allows
two (see ``_addresses``)."""
