"""The command line signing where a credentials file says: in process, on threads, in an HSM.

Against the sandbox over real HTTP, which verifies every signature with the public key
registered for the client; the HSM case against a real SoftHSM2 token (skipped, naming the
install command, without it).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from payments_async import Pkcs11Signer
from payments_async._keys import private_key_pem, public_key_pem
from payments_async.cli import cli
from payments_async.cli._files import load_credentials_file
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from payments_async.signing import KeySigner, ThreadPoolSigner
from payments_async.testing import generate_test_keypair
from tests.factories import credit_transfer
from tests.support.cli import ThreadedSandbox, threaded_sandbox
from tests.support.signing import SoftHsm, generate_token_key

CLIENT_ID = "cli-signer-client"
SECRET = "cli-signer-secret"
ISSUER = "cli-signer-issuer"
HSM_KEY = "cli-signer-key"
PIN_SHOWN = "never-show-this-pin"
# A PKCS#11 module that is not there: what the user is told, with the extra or without.
NO_MODULE = (
    "cannot load the PKCS#11 module"
    if importlib.util.find_spec("pkcs11") is not None
    else "needs the optional extra 'pkcs11'"
)


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=0.1)) as sb:
        yield sb


def _register(sb: ThreadedSandbox, public_pem: bytes, kid: str) -> None:
    sb.call(lambda: sb.server.register_client(CLIENT_ID, SECRET, public_pem, kid=kid, iss=ISSUER))


def _write(path: Path, fields: dict[str, Any]) -> Path:
    path.write_text(json.dumps(fields))
    return path


def _base(kid: str) -> dict[str, Any]:
    return {"client_id": CLIENT_ID, "client_secret": SECRET, "key_id": kid, "issuer": ISSUER}


def _pay(sb: ThreadedSandbox, creds: Path, tmp_path: Path) -> Result:
    msg = credit_transfer(amount="12.50")
    pay = tmp_path / f"pay-{msg.end_to_end_id}.json"
    pay.write_bytes(encode(msg))
    args = ["--json", "--base-url", sb.url, "--credentials", str(creds), "pay", str(pay)]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _thread_signing_file(sb: ThreadedSandbox, tmp_path: Path, kid: str) -> Path:
    """A credentials file whose key signs on 2 threads, its public half registered as ``kid``."""
    key = generate_test_keypair()[0]
    _register(sb, public_key_pem(key), kid)
    (tmp_path / "key.pem").write_bytes(private_key_pem(key))
    fields = {**_base(kid), "private_key_file": "key.pem", "signing_threads": 2}
    return _write(tmp_path / "creds.json", fields)


def test_signing_threads_sign_on_a_thread_pool_and_the_sandbox_accepts_them(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    creds = _thread_signing_file(sb, tmp_path, "kid-threads")
    loaded = load_credentials_file(creds)
    assert isinstance(loaded.key_signer, ThreadPoolSigner)
    loaded.key_signer.close()

    before = sb.stats()["payments_stored"]
    result = _pay(sb, creds, tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] is True
    assert sb.stats()["payments_stored"] == before + 1


def test_the_credentials_file_can_be_named_by_the_environment(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    # A worker started by a service manager or in a container names its file this way.
    creds = _thread_signing_file(sb, tmp_path, "kid-env-file")
    msg = credit_transfer(amount="13.50")
    pay = tmp_path / "pay.json"
    pay.write_bytes(encode(msg))
    before = sb.stats()["payments_stored"]
    result = CliRunner().invoke(
        cli,
        ["--json", "--base-url", sb.url, "pay", str(pay)],
        env={"PAYMENTS_CREDENTIALS_FILE": str(creds), "PAYMENTS_CLIENT_ID": ""},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] is True
    assert sb.stats()["payments_stored"] == before + 1

    missing = CliRunner().invoke(
        cli,
        ["--base-url", sb.url, "pay", str(pay)],
        env={"PAYMENTS_CREDENTIALS_FILE": str(tmp_path / "absent.json")},
    )
    assert missing.exit_code == 2
    assert "absent.json" in missing.output
    assert "Traceback" not in missing.output


@pytest.mark.parametrize(
    ("value", "args", "expected"),
    [
        # a directory (a secret mounted as one): only a command that needs the file fails
        ("{dir}", ["--sandbox", "token"], 0),
        ("{dir}", ["token"], 2),
        ("{absent}", ["--sandbox", "token"], 0),  # --sandbox comes first
        ("", ["token"], 2),  # empty: unset, so the PAYMENTS_* variables are asked for
        ("{absent}", ["--credentials", "{good}", "token"], 0),  # the option wins
    ],
    ids=["directory-sandbox", "directory", "sandbox-wins", "empty-is-unset", "option-wins"],
)
def test_the_credentials_variable_only_matters_where_credentials_are_read(
    sb: ThreadedSandbox, tmp_path: Path, value: str, args: list[str], expected: int
) -> None:
    good = _thread_signing_file(sb, tmp_path, "kid-env-order")
    names = {"dir": str(tmp_path), "absent": str(tmp_path / "absent.json"), "good": str(good)}
    result = CliRunner().invoke(
        cli,
        ["--base-url", sb.url, *(a.format(**names) for a in args)],
        env={"PAYMENTS_CREDENTIALS_FILE": value.format(**names)},
    )
    assert result.exit_code == expected, result.output
    assert "Traceback" not in result.output
    if value == "{dir}" and expected == 2:
        assert "cannot read credentials file" in result.output
    if value == "":
        assert "missing environment variable" in result.output


def test_a_key_file_alone_signs_in_process(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_bytes(private_key_pem(generate_test_keypair()[0]))
    loaded = load_credentials_file(
        _write(tmp_path / "creds.json", {**_base("kid-key"), "private_key_file": "key.pem"})
    )
    assert type(loaded.key_signer) is KeySigner
    assert loaded.private_key is not None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "exactly one of private_key_file and a pkcs11 table, not neither"),
        (
            {"private_key_file": "key.pem", "pkcs11": {}},
            "exactly one of private_key_file and a pkcs11 table, not both",
        ),
        ({"private_key_file": "key.pem", "signing_threads": 0}, "signing_threads must be"),
        ({"private_key_file": "key.pem", "signing_threads": "2"}, "signing_threads must be"),
        ({"private_key_file": "key.pem", "signing_threads": True}, "signing_threads must be"),
        ({"pkcs11": "token"}, "pkcs11 must be a table, not text"),
        ({"pkcs11": {"library": "x.so", "token_label": "t"}}, "pkcs11 lacks: key_label"),
        (
            {"pkcs11": {"library": "x.so", "token_label": "t", "key_label": "k"}},
            "exactly one of pin and pin_file",
        ),
        (
            {
                "pkcs11": {
                    "library": "x.so",
                    "token_label": "t",
                    "key_label": "k",
                    "pin": PIN_SHOWN,
                    "pin_file": "pin.txt",
                }
            },
            "exactly one of pin and pin_file",
        ),
        (
            {"pkcs11": {"library": "x.so", "token_label": "t", "key_label": "k", "pn": "1"}},
            "unknown key pn",
        ),
        (
            {"pkcs11": {"library": "x.so", "token_label": "t", "key_label": "k", "pin": 4711}},
            'pin must be text (quote it: pin = "1234")',
        ),
        (
            {
                "pkcs11": {
                    "library": "x.so",
                    "token_label": "t",
                    "key_label": "k",
                    "pin_file": "missing-pin.txt",
                }
            },
            "cannot read pin_file",
        ),
        (
            {
                "pkcs11": {
                    "library": "/nonexistent/libvendor-pkcs11.so",
                    "token_label": "t",
                    "key_label": "k",
                    "pin": PIN_SHOWN,
                }
            },
            NO_MODULE,  # said, the PIN unsaid
        ),
        ({"private_key_file": "key.pem", "pin": PIN_SHOWN}, "pin belong(s) in the pkcs11 table"),
        (  # the table's keys written without the table
            {"library": "x.so", "token_label": "t", "key_label": "k", "pin": PIN_SHOWN},
            "key_label, library, pin, token_label belong(s) in the pkcs11 table",
        ),
        (
            {
                "signing_threads": 2,
                "pkcs11": {"library": "x.so", "token_label": "t", "key_label": "k", "pin": "1"},
            },
            "signing_threads goes with private_key_file, not a pkcs11 table",
        ),
    ],
)
def test_credentials_file_signer_mistakes_are_one_line_usage_errors(
    tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    (tmp_path / "key.pem").write_bytes(private_key_pem(generate_test_keypair()[0]))
    creds = _write(tmp_path / "creds.json", {**_base("kid-bad"), **extra})
    result = CliRunner().invoke(
        cli, ["--base-url", "http://127.0.0.1:9", "--credentials", str(creds), "token"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert PIN_SHOWN not in result.output
    assert "Traceback" not in result.output


def test_an_empty_pin_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pin.txt").write_text("\n")
    hsm = {"library": "x.so", "token_label": "t", "key_label": "k", "pin_file": "pin.txt"}
    creds = _write(tmp_path / "creds.json", {**_base("kid-pin"), "pkcs11": hsm})
    result = CliRunner().invoke(
        cli, ["--base-url", "http://127.0.0.1:9", "--credentials", str(creds), "token"]
    )
    assert result.exit_code == 2
    assert "is empty" in result.stderr


@pytest.mark.parametrize("pin_in", ["pin", "pin_file"])
def test_a_pkcs11_table_signs_in_the_token_and_the_sandbox_accepts_it(
    sb: ThreadedSandbox, softhsm: SoftHsm, tmp_path: Path, pin_in: str
) -> None:
    label = f"{HSM_KEY}-{pin_in}"
    generate_token_key(softhsm, label)
    kid = f"kid-hsm-{pin_in}"
    with Pkcs11Signer(
        softhsm.library,
        token_label=softhsm.token_label,
        key_label=label,
        pin=softhsm.pin,
        key_id=kid,
    ) as signer:
        public = signer.public_key_pem()
    _register(sb, public, kid)
    hsm: dict[str, str] = {
        "library": softhsm.library,
        "token_label": softhsm.token_label,
        "key_label": label,
    }
    if pin_in == "pin":
        hsm["pin"] = softhsm.pin
    else:
        (tmp_path / "token.pin").write_text(softhsm.pin + "\n")
        hsm["pin_file"] = "token.pin"  # relative to the credentials file
    path = tmp_path / "creds.toml"
    lines = ["[credentials]", *(f'{k} = "{v}"' for k, v in _base(kid).items())]
    lines += ["[credentials.pkcs11]", *(f'{k} = "{v}"' for k, v in hsm.items())]
    path.write_text("\n".join(lines) + "\n")

    before = sb.stats()
    result = _pay(sb, path, tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] is True
    after = sb.stats()
    assert after["payments_stored"] == before["payments_stored"] + 1
    assert after["tokens_issued"] == before["tokens_issued"] + 1
    assert softhsm.pin not in result.output

    # A wrong PIN: one line, exit 2, and the PIN it was given is not in it.
    hsm_bad = {**hsm, "pin": PIN_SHOWN}
    hsm_bad.pop("pin_file", None)
    bad = _write(tmp_path / "bad.json", {**_base(kid), "pkcs11": hsm_bad})
    refused = CliRunner().invoke(cli, ["--base-url", sb.url, "--credentials", str(bad), "token"])
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.count("\n") == 1
    assert PIN_SHOWN not in refused.output


def test_a_command_closes_its_signer_whether_it_succeeds_or_fails(
    sb: ThreadedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    real_close = ThreadPoolSigner.close

    def recording_close(self: ThreadPoolSigner) -> None:
        closed.append(self.key_id)
        real_close(self)

    monkeypatch.setattr(ThreadPoolSigner, "close", recording_close)
    creds = _thread_signing_file(sb, tmp_path, "kid-close")
    ok = CliRunner().invoke(cli, ["--base-url", sb.url, "--credentials", str(creds), "token"])
    assert ok.exit_code == 0, ok.output
    assert closed == ["kid-close"]
    # The credentials are read, then the service address is refused: closed all the same.
    bad_url = CliRunner().invoke(
        cli, ["--base-url", "ftp://nowhere", "--credentials", str(creds), "token"]
    )
    assert bad_url.exit_code == 2, bad_url.output
    assert closed == ["kid-close", "kid-close"]
