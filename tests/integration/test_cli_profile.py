"""The command line on another edition of the service: --profile and the profile table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import ServiceProfile
from payments_async._keys import private_key_pem
from payments_async.cli import cli
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from tests.factories import credit_transfer
from tests.support.cli import ThreadedSandbox, threaded_sandbox

EDITION = ServiceProfile(
    pacs008_path="/payments/pacs008/v08",
    pacs002_path="/payments/pacs002/v10",
    client_id_header="X-Client-Id",
)
FLAGS = (
    "--profile",
    "pacs008_path=/payments/pacs008/v08",
    "--profile",
    "pacs002_path=/payments/pacs002/v10",
    "--profile",
    "client_id_header=X-Client-Id",
)


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SandboxConfig(processing_delay=0.1, profile=EDITION)) as sandbox:
        yield sandbox


def run(sb: ThreadedSandbox, *args: str, creds: tuple[str, ...] = ("--sandbox",)) -> Result:
    return CliRunner().invoke(cli, ["--json", "--base-url", sb.url, *creds, *args])


def payment(tmp_path: Path) -> Path:
    path = tmp_path / "pay.json"
    path.write_bytes(encode(credit_transfer()))
    return path


def test_pay_and_status_on_another_edition_with_profile_options(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    paid = run(sb, *FLAGS, "pay", str(payment(tmp_path)))
    assert paid.exit_code == 0, paid.output
    psid = json.loads(paid.stdout)["payments_service_id"]
    status = run(sb, *FLAGS, "status", psid)
    assert status.exit_code == 0, status.output
    # Without the profile, the spec's path is not this edition's.
    plain = run(sb, "pay", str(payment(tmp_path)))
    assert plain.exit_code != 0
    assert "404" in plain.output


def test_the_credentials_files_profile_table_and_options_over_it(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    creds = sb.handle.credentials
    assert creds is not None
    assert sb.handle.private_key is not None
    (tmp_path / "key.pem").write_bytes(private_key_pem(sb.handle.private_key))
    path = tmp_path / "creds.toml"
    path.write_text(
        "[credentials]\n"
        f'client_id = "{creds.client_id}"\nclient_secret = "{creds.client_secret}"\n'
        f'key_id = "{creds.key_id}"\nissuer = "{creds.issuer}"\nprivate_key_file = "key.pem"\n'
        "[credentials.profile]\n"
        'pacs008_path = "/payments/pacs008/v08"\npacs002_path = "/payments/pacs002/v10"\n'
        'client_id_header = "X-Wrong"\n'
    )
    file_only = ("--credentials", str(path))
    refused = run(sb, "pay", str(payment(tmp_path)), creds=file_only)
    assert refused.exit_code != 0
    # The table was read: its path was used, and the sandbox missed its own header name.
    assert "POST /payments/pacs008/v08 -> 400" in refused.output
    assert "missing: X-Client-Id" in refused.output
    fixed = run(
        sb,
        "--profile",
        "client_id_header=X-Client-Id",
        "pay",
        str(payment(tmp_path)),
        creds=file_only,
    )
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["created"] is True


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("pacs008_path", "field=value"),
        ("pacs009_path=/x", "pacs009_path"),
        ("pacs008_path=x", "'/'"),
    ],
)
def test_a_bad_profile_is_a_one_line_usage_error(sb: ThreadedSandbox, flag: str, said: str) -> None:
    result = run(sb, "--profile", flag, "token")
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert "Traceback" not in result.output
