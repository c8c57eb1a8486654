"""The command line as a user drives it: each command, its exit code and its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from cli_support import ThreadedSandbox, threaded_sandbox
from click.testing import CliRunner, Result

from payments_async._keys import private_key_pem
from payments_async.cli import cli
from payments_async.iso20022 import build_cancellation, build_credit_transfer, encode
from payments_async.sandbox import REJECT_IBAN_AC04, SandboxConfig

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
