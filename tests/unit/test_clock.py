"""The clock-skew estimator: Date parsing, threshold, hysteresis, explained refusals."""

from __future__ import annotations

import email.utils

import pytest

from payments_async import ConfigurationError, Credentials, PaymentsClient
from payments_async._clock import ClockSkew, parse_http_date
from payments_async._constants import CLOCK_SKEW_THRESHOLD

T0 = 1_800_000_000.0  # a whole second, so Date headers are exact


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def test_parse_http_date_reads_imf_fixdate_and_refuses_junk() -> None:
    assert parse_http_date("Fri, 15 Jan 2027 08:00:00 GMT") == T0
    assert parse_http_date(http_date(T0)) == T0
    for bad in (None, "", "yesterday", "Fri, 15 Jan 2027 08:00:00 -0000", "Fri, 99 Foo"):
        assert parse_http_date(bad) is None


def test_small_differences_are_ignored() -> None:
    ours = FakeClock(T0 + 0.3)
    skew = ClockSkew(clock=ours)
    # The service is 3 s ahead: under the threshold, our clock is trusted.
    assert skew.observe(http_date(T0 + 3)) is False
    assert skew.offset == 0.0
    assert skew.estimate == pytest.approx(3.2, abs=0.01)
    assert skew.now() == ours.now


@pytest.mark.parametrize("service_offset", [-300.0, 300.0, -3600.0, 7.0])
def test_large_differences_are_applied(service_offset: float) -> None:
    ours = FakeClock(T0)
    skew = ClockSkew(clock=ours)
    assert skew.observe(http_date(T0 + service_offset), elapsed=0.2) is True
    # Date has a one-second resolution: the estimate is good to about half a second.
    assert skew.offset == pytest.approx(service_offset, abs=1.0)
    assert skew.now() == pytest.approx(T0 + service_offset, abs=1.0)


def test_offset_does_not_flap_with_the_one_second_resolution() -> None:
    ours = FakeClock(T0)
    skew = ClockSkew(clock=ours)
    assert skew.observe(http_date(T0 - 300)) is True
    applied = skew.offset
    for step in range(20):  # the service's second boundary falls anywhere in our second
        ours.now = T0 + 10 + step * 0.37
        assert skew.observe(http_date(ours.now - 300)) is False
    assert skew.offset == applied


def test_a_fixed_local_clock_returns_the_offset_to_zero() -> None:
    ours = FakeClock(T0)
    skew = ClockSkew(clock=ours)
    skew.observe(http_date(T0 + 120))
    assert skew.offset != 0.0
    assert skew.observe(http_date(T0)) is True  # NTP fixed our clock
    assert skew.offset == 0.0


def test_explains_tells_whether_signing_again_can_help() -> None:
    ours = FakeClock(T0)
    skew = ClockSkew(clock=ours)
    signed_with = skew.offset
    assert skew.observe(http_date(T0 + 1)) is False
    assert skew.explains(signed_with) is False  # a 401 for another reason
    assert skew.observe(http_date(T0 - 300)) is True
    assert skew.explains(signed_with) is True
    assert skew.explains(skew.offset) is False  # signed on the corrected clock already


def test_missing_or_bad_date_teaches_nothing() -> None:
    skew = ClockSkew(clock=FakeClock(T0))
    assert skew.observe(None) is False
    assert skew.observe("not a date") is False
    assert skew.estimate is None
    assert skew.offset == 0.0


def test_threshold_is_named_and_validated() -> None:
    assert ClockSkew().threshold == CLOCK_SKEW_THRESHOLD
    for bad in (0.0, -1.0, float("inf"), float("nan"), "5", True):
        with pytest.raises(ValueError, match="threshold"):
            ClockSkew(bad)  # type: ignore[arg-type]
    assert "offset=+0.0s" in repr(ClockSkew())


def test_no_threshold_trusts_our_clock_but_still_measures() -> None:
    skew = ClockSkew(None, clock=FakeClock(T0))
    assert skew.observe(http_date(T0 - 3600)) is False
    assert skew.offset == 0.0
    assert skew.estimate == pytest.approx(-3599.5)


@pytest.mark.parametrize("bad", [0, -5.0, float("nan"), "5"])
def test_client_refuses_a_bad_threshold(rsa_credentials: Credentials, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="clock skew threshold"):
        PaymentsClient(
            rsa_credentials,
            base_url="https://api.bank.example",
            clock_skew_threshold=bad,  # type: ignore[arg-type]
        )
