"""The command line as a user drives it: each command, its exit code and its output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async._keys import private_key_pem
from payments_async.cli import cli
from payments_async.iso20022 import build_cancellation, build_credit_transfer, encode
from payments_async.sandbox import REJECT_IBAN_AC04, FaultConfig, SandboxConfig
from tests.support.cli import (
    FakeService,
    ThreadedSandbox,
    fake_service,
    free_port,
    threaded_sandbox,
)

ROOT = Path(__file__).resolve().parents[2]
CREDITOR_IBAN = "DE89370400440532013000"


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    config = SandboxConfig(processing_delay=1.5, settlement_delay=0.1)
    with threaded_sandbox(config) as sandbox:
        yield sandbox


def run(sb: ThreadedSandbox, *args: str, sandbox_creds: bool = True) -> Result:
    base = ["--base-url", sb.url]
    if sandbox_creds:
        base.append("--sandbox")
    return CliRunner().invoke(cli, [*base, *args], catch_exceptions=False)


def run_json(sb: ThreadedSandbox, *args: str) -> tuple[int, dict[str, object]]:
    result = run(sb, "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def payment_file(tmp_path: Path, name: str = "pay.json", **kw: object) -> tuple[Path, str]:
    msg = build_credit_transfer(
        debtor_name="Alice Martin",
        debtor_iban="FR1420041010050500013M02606",
        debtor_agent_id="30004",
        creditor_name="Bob Schmidt",
        creditor_iban=str(kw.pop("creditor_iban", CREDITOR_IBAN)),
        creditor_agent_id="37040044",
        amount=Decimal("42.00"),
    )
    path = tmp_path / name
    path.write_bytes(encode(msg))
    return path, msg.end_to_end_id


def test_help_explains_commands_credentials_and_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for word in ("demo", "bulk-cancel", "keygen", "--sandbox", "--credentials", "Exit codes"):
        assert word in result.output
    bulk_help = CliRunner().invoke(cli, ["bulk-cancel", "--help"])
    assert bulk_help.exit_code == 0
    assert "--no-journal" in bulk_help.output
    assert "resumes" in bulk_help.output


def test_demo_runs_the_whole_mission_in_a_real_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for expected in (
        "listening on http://127.0.0.1:",
        "RSA-2048",
        "expires in",
        "201 created",
        "status PEND",
        "ACCEPTED",
        "processed: ACCC",
        "REJECTED",
        "pacs.004",
        "200 replayed, same paymentsServiceId: True",
    ):
        assert expected in out, (expected, out)
    assert "Traceback" not in proc.stderr


def test_token_with_predefined_sandbox_credentials(sb: ThreadedSandbox) -> None:
    result = run(sb, "token")
    assert result.exit_code == 0, result.output
    assert "access token obtained" in result.stdout
    code, data = run_json(sb, "token")
    assert code == 0
    assert data["ok"] is True
    assert "access_token" not in json.dumps(data)  # the token itself never leaves


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_token_with_a_credentials_file_signs_with_the_key(
    sb: ThreadedSandbox, tmp_path: Path, fmt: str
) -> None:
    creds = sb.handle.credentials
    assert creds is not None
    assert sb.handle.private_key is not None
    (tmp_path / "key.pem").write_bytes(private_key_pem(sb.handle.private_key))
    fields = {
        "client_id": creds.client_id,
        "client_secret": creds.client_secret,
        "key_id": creds.key_id,
        "issuer": creds.issuer,
        "private_key_file": "key.pem",  # relative to the credentials file
    }
    path = tmp_path / f"creds.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(fields))
    else:
        path.write_text("[credentials]\n" + "".join(f'{k} = "{v}"\n' for k, v in fields.items()))
    before = sb.stats()["tokens_issued"]
    result = run(sb, "--credentials", str(path), "token", sandbox_creds=False)
    assert result.exit_code == 0, result.output
    assert sb.stats()["tokens_issued"] == before + 1


def test_missing_credentials_is_a_one_line_usage_error(sb: ThreadedSandbox) -> None:
    result = run(sb, "token", sandbox_creds=False)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "PAYMENTS_CLIENT_ID" in result.stderr
    assert "--sandbox" in result.stderr
    assert "Traceback" not in result.output


def test_missing_base_url_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["--credentials", "nope.json", "token"])
    assert result.exit_code == 2
    assert "cannot read credentials file" in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pw-Secret1@[::1",
        "http://user:pw-Secret1@127.0.0.1:99999",
        "ftp://user:pw-Secret1@host",
        "user:pw-Secret1@host",
        "http://user:pw/Secret1@127.0.0.1:8765",
    ],
)
@pytest.mark.parametrize("flags", [[], ["--json"], ["-vv"]], ids=["plain", "json", "vv"])
def test_a_malformed_base_url_is_named_without_its_password(url: str, flags: list[str]) -> None:
    result = CliRunner().invoke(cli, [*flags, "--sandbox", "--base-url", url, "token"])
    assert result.exit_code == 2, result.output
    assert "--base-url" in result.output
    assert "Secret1" not in result.output


def test_refused_credentials_are_exit_3_with_one_line(sb: ThreadedSandbox, tmp_path: Path) -> None:
    creds = sb.handle.credentials
    assert creds is not None
    assert sb.handle.private_key is not None
    (tmp_path / "key.pem").write_bytes(private_key_pem(sb.handle.private_key))
    path = tmp_path / "creds.json"
    path.write_text(
        json.dumps(
            {
                "client_id": creds.client_id,
                "client_secret": "not-the-secret",
                "key_id": creds.key_id,
                "issuer": creds.issuer,
                "private_key_file": str(tmp_path / "key.pem"),
            }
        )
    )
    result = run(sb, "--credentials", str(path), "token", sandbox_creds=False)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
    assert "401" in result.stderr
    assert "not-the-secret" not in result.output


def test_a_payment_the_service_accepted_with_202_is_shown_as_202(tmp_path: Path) -> None:
    """A busy service answers 202 Accepted: the command says so, never "201"."""
    with threaded_sandbox(SandboxConfig(faults=FaultConfig(accepted_202=1.0))) as busy:
        path, _ = payment_file(tmp_path)
        human = run(busy, "pay", str(path))
        assert human.exit_code == 0, human.output
        assert "202 accepted" in human.stdout
        assert "201" not in human.stdout
        code, shown = run_json(busy, "pay", str(path))
        assert code == 0
        assert (shown["http_status"], shown["replayed"]) == (200, True)


def test_pay_then_replay_then_status(sb: ThreadedSandbox, tmp_path: Path) -> None:
    path, e2e = payment_file(tmp_path)
    code, first = run_json(sb, "pay", str(path))
    assert code == 0
    assert first["created"] is True
    assert first["http_status"] == 201
    assert first["end_to_end_id"] == e2e
    code, again = run_json(sb, "pay", str(path))
    assert code == 0
    assert again["replayed"] is True
    assert again["http_status"] == 200
    assert again["payments_service_id"] == first["payments_service_id"]
    psid = str(first["payments_service_id"])

    human = run(sb, "status", psid)
    assert human.exit_code == 0
    assert "PEND" in human.stdout
    assert "not final yet" in human.stdout
    code, final = run_json(sb, "status", psid, "--wait", "--timeout", "20")
    assert code == 0
    assert final["status"] == "ACCC"
    assert final["final"] is True


def test_rejected_payment_status_is_exit_1(sb: ThreadedSandbox, tmp_path: Path) -> None:
    path, _ = payment_file(tmp_path, creditor_iban=REJECT_IBAN_AC04)
    _, sub = run_json(sb, "pay", str(path))
    result = run(sb, "status", str(sub["payments_service_id"]), "--wait", "--timeout", "20")
    assert result.exit_code == 1
    assert "RJCT" in result.stdout
    assert "AC04" in result.stdout


def test_cancel_unprocessed_payment_is_accepted(sb: ThreadedSandbox, tmp_path: Path) -> None:
    path, e2e = payment_file(tmp_path)
    assert run(sb, "pay", str(path)).exit_code == 0
    row = {
        "original_end_to_end_id": e2e,
        "amount": "42.00",
        "creditor_agent_bic": "COBADEFFXXX",
        "creditor_iban": CREDITOR_IBAN,
        "reason": "DUPL",
        "assigner_bic": "BNPAFRPPXXX",
        "assignee_bic": "COBADEFFXXX",
        "assignment_id": f"ASG-{e2e[-20:]}",
    }
    cxl = tmp_path / "cancel.json"
    cxl.write_text(json.dumps(row))
    result = run(sb, "cancel", str(cxl), "--wait", "--timeout", "20")
    assert result.exit_code == 0, result.output
    assert "201 created" in result.stdout
    assert "ACCEPTED" in result.stdout
    # the same object again is a new message (new creation time) under the same
    # assgnmt.id: the service answers 200 with the stored cancellation (service notes 2),
    # and nothing new is stored
    before = sb.stats()["cancellations_stored"]
    again = run(sb, "cancel", str(cxl))
    assert again.exit_code == 0, again.output
    assert "200 replayed" in again.stdout
    assert sb.stats()["cancellations_stored"] == before
    assert sb.stats()["replays_changed_body"] == 1


def test_cancel_camt056_for_unknown_payment_is_rejected_exit_1(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    msg = build_cancellation(
        original_end_to_end_id="E2E-NEVER-SENT",
        amount=Decimal("1.00"),
        creditor_agent_bic="COBADEFFXXX",
        creditor_iban=CREDITOR_IBAN,
        assigner_bic="BNPAFRPPXXX",
        assignee_bic="COBADEFFXXX",
    )
    path = tmp_path / "camt056.json"
    path.write_bytes(encode(msg))
    code, sub = run_json(sb, "cancel", str(path))
    assert code == 0
    assert sub["created"] is True
    psid = str(sub["payments_service_id"])
    code, again = run_json(sb, "cancel", str(path))  # the very same message: a replay
    assert code == 0
    assert again["replayed"] is True
    assert again["payments_service_id"] == psid
    waited = run(sb, "outcome", psid, "--wait", "--timeout", "20")
    assert waited.exit_code == 1
    assert "REJECTED" in waited.stdout
    assert "NOOR" in waited.stdout
    assert "no return request is needed" in waited.stdout  # NOOR: nothing was paid
    code, data = run_json(sb, "outcome", psid)
    assert code == 1
    assert data["outcome"] == "rejected"
    assert data["return_request_needed"] is False


def test_invalid_cancel_file_is_exit_2_and_nothing_is_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "original_end_to_end_id": "E2E-1",
                "amount": "1.00",
                "creditor_agent_bic": "NOTABIC",
                "creditor_iban": "DE00370400440532013000",
                "reason": "DUPL",
                "assigner_bic": "BNPAFRPPXXX",
                "assignee_bic": "COBADEFFXXX",
            }
        )
    )
    before = sb.stats()["requests"].get("camt056", 0)
    result = run(sb, "cancel", str(path))
    assert result.exit_code == 2
    # Every problem of the object, each named by its column.
    assert "creditor_agent_bic: not a BICFI" in result.stderr
    assert "creditor_iban:" in result.stderr
    assert sb.stats()["requests"].get("camt056", 0) == before
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"foo": 1}))
    result = run(sb, "cancel", str(unknown))
    assert result.exit_code == 2
    assert "unknown field 'foo'" in result.stderr
    assert "original_end_to_end_id: required, but empty" in result.stderr


def test_outcome_of_unknown_id_is_exit_3(sb: ThreadedSandbox) -> None:
    result = run(sb, "outcome", "cxl-does-not-exist")
    assert result.exit_code == 3
    assert "404" in result.stderr


def test_keygen_writes_a_private_key_and_prints_registration_facts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["keygen", "--dir", str(tmp_path), "--bits", "2048", "--iss", "acme"]
    )
    assert result.exit_code == 0, result.output
    private = tmp_path / "client-private.pem"
    assert private.exists()
    assert (tmp_path / "client-public.pem").exists()
    assert os.stat(private).st_mode & 0o777 == 0o600
    assert "-----BEGIN PUBLIC KEY-----" in result.stdout
    assert "kid  kid-" in result.stdout
    assert "iss  acme" in result.stdout
    again = CliRunner().invoke(cli, ["--json", "keygen", "--dir", str(tmp_path)])
    assert again.exit_code == 2  # never overwrites a key
    assert "refusing to overwrite" in json.loads(again.stdout)["error"]  # --json: stdout
    small = CliRunner().invoke(cli, ["keygen", "--dir", str(tmp_path), "--bits", "1024"])
    assert small.exit_code == 2


# --- a clear line, never a traceback ----------------------------

_DEEP = "[" * 100_000 + "]" * 100_000
_DEEP_OBJECT = '{"a":' * 5_000 + "1" + "}" * 5_000
_CREDS = {
    "client_id": "acme",
    "client_secret": "s3cret",
    "key_id": "kid-1",
    "issuer": "acme",
    "private_key_file": "key.pem",
}


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Command lines a user may get wrong -> (argv, what the one line must name)."""
    files = {
        "latin1.json": b'{"original_end_to_end_id": "Caf\xe9"}',
        "deep.json": _DEEP.encode(),
        "deep-object.json": _DEEP_OBJECT.encode(),
        "latin1.csv": b"original_end_to_end_id,amount\nCaf\xe9,1.00\n",
        "deep.jsonl": _DEEP.encode() + b"\n",
        "creds-types.json": json.dumps(_CREDS | {"client_id": 5, "issuer": ["a"]}).encode(),
        "creds-latin1.json": b'{"client_id": "Caf\xe9"}',
        "creds-deep.json": _DEEP.encode(),
        "creds-types.toml": b'client_id = 5\nclient_secret = "x"\n',
        "creds-latin1.toml": b'client_id = "Caf\xe9"\n',
        "amount-exp.json": json.dumps(
            {
                "original_end_to_end_id": "E2E-1",
                "amount": "1e3",
                "creditor_agent_bic": "COBADEFFXXX",
                "creditor_iban": CREDITOR_IBAN,
                "reason": "DUPL",
                "assigner_bic": "BNPAFRPPXXX",
                "assignee_bic": "COBADEFFXXX",
            }
        ).encode(),
        # json.loads keeps the last of two values: E2E-2 would be cancelled, not E2E-1.
        "twice.json": b'{"original_end_to_end_id": "E2E-1", "original_end_to_end_id": "E2E-2"}',
        "twice.jsonl": b'{"amount": "1.00", "amount": "100.00"}\n',
        "pay-twice.json": b'{"fitoFICstmrCdtTrf": {}, "fitoFICstmrCdtTrf": {}}',
        "creds-twice.json": json.dumps(_CREDS).replace("{", '{"key_id": "kid-0", ', 1).encode(),
        "creds-iss-newline.json": json.dumps(_CREDS | {"issuer": "my-client\n"}).encode(),
        "creds-kid-space.toml": b'client_id = "c"\nclient_secret = "s"\nkey_id = "kid 1"\n'
        b'issuer = "i"\nprivate_key_file = "key.pem"\n',
        "ca.pem": b"not a certificate\n",
        "huge.json": b"{}" + b" " * (5 * 1024 * 1024),
    }
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    f = {name: str(tmp / name) for name in files}
    url = f"http://127.0.0.1:{free_port()}"  # nothing is sent in any of these cases
    sb = ["--sandbox", "--base-url", url]
    return {
        "pay non-UTF-8": ([*sb, "pay", f["latin1.json"]], "not UTF-8"),
        "pay deep JSON": ([*sb, "pay", f["deep.json"]], "nested"),
        "pay deep object": ([*sb, "pay", f["deep-object.json"]], "nested"),
        "cancel non-UTF-8": ([*sb, "cancel", f["latin1.json"]], "not UTF-8"),
        "cancel deep JSON": ([*sb, "cancel", f["deep.json"]], "nested"),
        "cancel 1e3": ([*sb, "cancel", f["amount-exp.json"]], "not a decimal number"),
        "cancel key twice": ([*sb, "cancel", f["twice.json"]], "'original_end_to_end_id' appears"),
        "pay key twice": ([*sb, "pay", f["pay-twice.json"]], "'fitoFICstmrCdtTrf' appears twice"),
        "bulk key twice": ([*sb, "bulk-cancel", f["twice.jsonl"]], "1 problem in"),
        "bulk non-UTF-8": ([*sb, "bulk-cancel", f["latin1.csv"]], "line 2"),
        "bulk deep JSONL": ([*sb, "bulk-cancel", f["deep.jsonl"]], "problem"),
        "port out of range": (
            ["--sandbox", "--base-url", "http://127.0.0.1:99999", "token"],
            "Port out of range",
        ),
        "malformed URL": (["--sandbox", "--base-url", "http://[::1", "token"], "--base-url"),
        "not a URL": (["--sandbox", "--base-url", "notaurl", "status", "x"], "--base-url"),
        "ftp URL": (["--sandbox", "--base-url", "ftp://host", "outcome", "x"], "--base-url"),
        "creds wrong types": (
            ["--credentials", f["creds-types.json"], "--base-url", url, "token"],
            "client_id must be text, not a number",
        ),
        "creds non-UTF-8": (
            ["--credentials", f["creds-latin1.json"], "--base-url", url, "token"],
            "not UTF-8",
        ),
        "creds key twice": (
            ["--credentials", f["creds-twice.json"], "--base-url", url, "token"],
            "'key_id' appears twice",
        ),
        "creds deep": (
            ["--credentials", f["creds-deep.json"], "--base-url", url, "token"],
            "nested",
        ),
        "creds TOML wrong types": (
            ["--credentials", f["creds-types.toml"], "--base-url", url, "token"],
            "client_id must be text",
        ),
        "creds TOML non-UTF-8": (
            ["--credentials", f["creds-latin1.toml"], "--base-url", url, "token"],
            "not UTF-8",
        ),
        "bad id": ([*sb, "status", "a/b"], "paymentsServiceId"),
        "sandbox port out of range": (["sandbox", "--port", "99999"], "port"),
        "concurrency 0": ([*sb, "bulk-cancel", "--concurrency", "0", f["latin1.csv"]], "0"),
        "timeout not a number": ([*sb, "outcome", "x", "--timeout", "soon"], "soon"),
        "timeout negative": ([*sb, "status", "x", "--wait", "--timeout", "-1"], "-1"),
        "timeout nan": ([*sb, "cancel", "x.json", "--timeout", "nan"], "nan"),
        "timeout zero": ([*sb, "bulk-cancel", "--timeout", "0", f["latin1.csv"]], "0 is not"),
        "timeout infinite": ([*sb, "outcome", "x", "--timeout", "inf"], "inf"),
        "unknown option": ([*sb, "token", "--nope"], "--nope"),
        "unknown command": (["paymnt"], "paymnt"),
        "missing file": ([*sb, "pay", str(tmp / "missing.json")], "missing.json"),
        "keygen bits": (["keygen", "--dir", str(tmp / "k"), "--bits", "512"], "512"),
        "keygen bits too many": (["keygen", "--dir", str(tmp / "k"), "--bits", "100000"], "8192"),
        "keygen kid space": (["keygen", "--dir", str(tmp / "k"), "--kid", "a b"], "whitespace"),
        "keygen iss newline": (["keygen", "--dir", str(tmp / "k"), "--iss", "i\n"], "U+000A"),
        "keygen name as iss": (["keygen", "--dir", str(tmp / "k"), "--name", "my key"], "SPACE"),
        "creds iss newline": (
            ["--credentials", f["creds-iss-newline.json"], "--base-url", url, "token"],
            "issuer must not hold whitespace or control characters (U+000A at position 9)",
        ),
        "creds kid space": (
            ["--credentials", f["creds-kid-space.toml"], "--base-url", url, "token"],
            "key_id must not hold whitespace",
        ),
        "ca file not PEM": ([*sb, "--ca-file", f["ca.pem"], "token"], "no usable PEM"),
        "pay endless": ([*sb, "pay", "/dev/zero"], "larger than 4,096 KiB"),
        "pay huge": ([*sb, "pay", f["huge.json"]], "larger than 4,096 KiB"),
        "cancel huge": ([*sb, "cancel", f["huge.json"]], "larger than 4,096 KiB"),
        "creds huge": (
            ["--credentials", f["huge.json"], "--base-url", url, "token"],
            "credentials file",
        ),
        "demo delay negative": (["demo", "--processing-delay", "-1"], "-1"),
        "demo delay nan": (["demo", "--processing-delay", "nan"], "nan"),
    }


def test_every_bad_input_is_one_line_and_exit_2_never_a_traceback(tmp_path: Path) -> None:
    """A fuzz over every command: each user mistake is one line naming it, exit 2."""
    failures = []
    for name, (argv, named) in _bad_inputs(tmp_path).items():
        for as_json in (False, True):
            args = ["--json", *argv] if as_json else argv
            result = CliRunner().invoke(cli, args)
            output = result.stdout + result.stderr
            problem = None
            if result.exit_code != 2:
                problem = f"exit {result.exit_code}"
            elif not isinstance(result.exception, SystemExit) or "Traceback" in output:
                problem = f"traceback: {result.exception!r}"
            elif as_json:
                lines = result.stdout.splitlines()
                obj = json.loads(lines[-1]) if lines else {}
                if obj.get("exit_code") != 2 or named not in obj.get("error", ""):
                    problem = f"JSON error object: {result.stdout!r}"
            else:
                errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
                if len(errors) != 1 or named not in errors[0]:
                    problem = f"one line naming {named!r}: {result.stderr!r}"
            if problem:
                failures.append(f"{name} (json={as_json}): {problem}")
    assert not failures, "\n".join(failures)


def test_a_bad_file_in_a_real_process_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"original_end_to_end_id,amount\n\xff\xfe,1.00\n")
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "--sandbox", "bulk-cancel", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [x for x in proc.stderr.splitlines() if x.startswith("error")] == [
        f"error: {str(bad)!r}, line 2, is not UTF-8 text (byte 0xff at offset 30); save it as UTF-8"
    ]


@pytest.mark.parametrize(
    "command",
    [["token"], ["status", "pay-1"], ["outcome", "cxl-1", "--wait"], ["bulk-cancel", "IN"]],
    ids=["token", "status", "outcome-wait", "bulk-cancel"],
)
def test_an_unreachable_service_is_named_and_given_up_on_within_10_s(
    tmp_path: Path, command: list[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        "original_end_to_end_id,amount,creditor_agent_bic,creditor_iban,reason,"
        f"assigner_bic,assignee_bic\nE2E-1,1.00,COBADEFFXXX,{CREDITOR_IBAN},DUPL,"
        "BNPAFRPPXXX,COBADEFFXXX\n"
    )
    command = [str(src) if c == "IN" else c for c in command]
    url = f"http://127.0.0.1:{free_port()}"
    # The command's own time, from when the program has imported its code (every command's
    # module, and with them aiohttp, cryptography, rich...): on a loaded machine starting
    # an interpreter and importing took seconds of their own (5 s seen at a load of 8),
    # which is not the retry window under test. The monotonic clock is the machine's.
    ready = tmp_path / "ready"
    program = (
        "import importlib, sys, time\n"
        "from payments_async.__main__ import main\n"
        "from payments_async.cli import _COMMANDS\n"
        "for entry in _COMMANDS.values():\n"
        "    importlib.import_module('payments_async.cli.commands.' + entry.module)\n"
        "open(sys.argv[1], 'w').write(repr(time.monotonic()))\n"
        "main(sys.argv[2:])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program, str(ready), "--sandbox", "--base-url", url, *command],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # bulk-cancel writes its results to the working directory
        check=False,
    )
    took = time.monotonic() - float(ready.read_text())
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error")]
    assert len(errors) == 1, proc.stderr
    # The line a wait stopped by the outage shows too: whichever request met it first.
    assert re.match(
        rf"error: connection refused to {re.escape(url)} since \d\d:\d\d:\d\d$", errors[0]
    ), proc.stderr
    assert took < 10, f"gave up after {took:.1f} s"
    assert not list(tmp_path.glob("*.sqlite*"))  # bulk: no journal for a run never started


def test_outcome_with_codes_nobody_can_classify_is_exit_3_with_every_raw_code() -> None:
    with fake_service(FakeService(conf="ZZZZ", tx_cxl_sts="ZZZY")) as fake:
        base = ["--sandbox", "--base-url", fake.url]
        result = CliRunner().invoke(cli, [*base, "outcome", "cxl-1"])
        assert result.exit_code == 3, result.output
        assert "cancellation UNKNOWN" in result.stdout
        assert "raw codes  ZZZZ ZZZY" in result.stdout
        assert "check with the bank" in result.stdout
        as_json = CliRunner().invoke(cli, [*base, "--json", "outcome", "cxl-1"])
        assert as_json.exit_code == 3
        data = json.loads(as_json.stdout)
        assert (data["outcome"], data["status"], data["tx_statuses"]) == (
            "unknown",
            "ZZZZ",
            ["ZZZY"],
        )
        # A contradiction (accepted for the group, refused for the transaction) too.
        fake.conf, fake.tx_cxl_sts = "ACCC", "RJCR"
        contradiction = CliRunner().invoke(cli, [*base, "outcome", "cxl-1"])
        assert contradiction.exit_code == 3
        assert "raw codes  ACCC RJCR" in contradiction.stdout


def test_status_with_a_code_nobody_can_classify_is_exit_3() -> None:
    with fake_service(FakeService(tx_sts="WXYZ")) as fake:
        base = ["--sandbox", "--base-url", fake.url]
        result = CliRunner().invoke(cli, [*base, "status", "pay-1"])
        assert result.exit_code == 3, result.output
        assert "raw codes  WXYZ" in result.stdout
        as_json = CliRunner().invoke(cli, [*base, "--json", "status", "pay-1"])
        assert as_json.exit_code == 3
        assert json.loads(as_json.stdout)["tx_statuses"] == ["WXYZ"]
        fake.tx_sts = "ACCC"
        assert CliRunner().invoke(cli, [*base, "status", "pay-1"]).exit_code == 0


@pytest.mark.parametrize("command", ["status", "outcome"])
def test_the_timeout_option_bounds_the_command_the_token_included(command: str) -> None:
    # The token endpoint answers after 2 s: --timeout 0.5 ends the command first, and
    # nothing after the token request is sent.
    with fake_service(FakeService(token_delay=2.0)) as fake:
        base = ["--sandbox", "--base-url", fake.url]
        start = time.monotonic()
        result = CliRunner().invoke(cli, [*base, command, "id-1", "--timeout", "0.5"])
        took = time.monotonic() - start
        assert result.exit_code == 3, result.output
        assert re.search(r"no access token within 0\.[45]\d* s", result.stderr), result.stderr
        assert took < 1.6  # long before the token's answer
        assert set(fake.requests or {}) == {"token"}  # no read was sent
        # let the fake finish the abandoned token request before it stops, so that its
        # connection is closed here and not left to the next test's collector
        time.sleep(max(0.0, 2.3 - took))


@pytest.mark.parametrize("command", ["status", "outcome"])
def test_one_read_takes_its_timeout_from_the_option(command: str) -> None:
    # The read answers after 2 s: longer than --timeout 0.5, shorter than the default 5 s.
    with fake_service(FakeService(read_delay=2.0)) as fake:
        base = ["--sandbox", "--base-url", fake.url]
        start = time.monotonic()
        short = CliRunner().invoke(cli, [*base, command, "id-1", "--timeout", "0.5"])
        took = time.monotonic() - start
        assert short.exit_code == 3, short.output
        assert "timed out" in short.stderr
        assert took < 1.9  # gave up before the answer came
        default = CliRunner().invoke(cli, [*base, command, "id-1"])
        assert default.exit_code == 0, default.output  # the default 5 s waited for it
