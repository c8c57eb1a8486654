"""Every block of docs/sync.md runs against the sandbox, as the page says it does.

Django, Flask and Celery are not installed with the library; where one is missing, a
minimal stand-in module takes its place (``JsonResponse``, ``Flask.get``, ``jsonify``,
``shared_task``) and the test calls the view, route or task as the framework would.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from payments_async import Outcome, Pacs008
from payments_async._keys import private_key_pem
from payments_async.sandbox import SandboxConfig
from payments_async.testing import (  # the fixtures, as pytest_plugins would give them
    SandboxHandle,
    payments_sandbox_config,  # noqa: F401
    payments_sync_client,  # noqa: F401
    payments_sync_sandbox,  # noqa: F401
    sandbox_in_thread,
)
from tests.factories import cancellation_for, credit_transfer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sync.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
INTRO, DJANGO_CLIENT, DJANGO_VIEWS, FLASK, CELERY, SCRIPT, CONFTEST, TEST_PAY = BLOCKS
SERVICE = "https://payments.example.com"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxHandle]:
    """A sandbox whose registered client ``Credentials.from_env()`` finds."""
    with sandbox_in_thread(SandboxConfig(processing_delay=0.1, settlement_delay=0.05)) as sb:
        assert sb.credentials is not None
        assert sb.private_key is not None
        key = tmp_path / "key.pem"
        key.write_bytes(private_key_pem(sb.private_key))
        creds = sb.credentials
        for name, value in {
            "PAYMENTS_CLIENT_ID": creds.client_id,
            "PAYMENTS_CLIENT_SECRET": creds.client_secret,
            "PAYMENTS_KEY_ID": creds.key_id,
            "PAYMENTS_ISSUER": creds.issuer,
            "PAYMENTS_PRIVATE_KEY_FILE": str(key),
        }.items():
            monkeypatch.setenv(name, str(value))
        yield sb


def _run(code: str, **names: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "docs_example", **names}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def _stand_in(monkeypatch: pytest.MonkeyPatch, name: str, **attributes: Any) -> None:
    """Install a minimal module ``name`` unless the real one is installed."""
    if importlib.util.find_spec(name.split(".")[0]) is not None:
        return
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        module = types.ModuleType(".".join(parts[:i]))
        if i == len(parts):
            module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        if i > 1:
            setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], module)


def _close_clients(namespace: dict[str, Any]) -> None:
    namespace["client"].close()


def test_the_first_example_cancels_through_the_sandbox(sandbox: SandboxHandle) -> None:
    namespace = _run(INTRO.replace(SERVICE, sandbox.url))
    # No such payment in the sandbox: its cancellation is answered, and rejected.
    assert namespace["outcome"].outcome is Outcome.REJECTED


class _Request:
    def __init__(self, body: bytes) -> None:
        self.body = body


class _JsonResponse:
    def __init__(self, data: dict[str, Any], status: int = 200) -> None:
        self.data, self.status_code = data, status


def _transfer_fields() -> dict[str, Any]:
    return {
        "debtor_name": "Alice Debtor",
        "debtor_iban": "FR1420041010050500013M02606",
        "debtor_agent_id": "10010010",
        "creditor_name": "Bob Creditor",
        "creditor_iban": "DE89370400440532013000",
        "creditor_agent_id": "37040044",
        "amount": "12.34",
    }


def test_the_django_view(sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "django.http", JsonResponse=_JsonResponse)
    client_module = types.ModuleType("payments.client")
    client_module.__dict__["PAYMENTS_URL"] = sandbox.url
    exec(compile(DJANGO_CLIENT, str(PAGE), "exec"), client_module.__dict__)
    package = types.ModuleType("payments")
    package.client = client_module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "payments", package)
    monkeypatch.setitem(sys.modules, "payments.client", client_module)
    try:
        views = _run(DJANGO_VIEWS)
        created = views["pay"](_Request(json.dumps(_transfer_fields()).encode()))
        refused = views["pay"](
            _Request(json.dumps({**_transfer_fields(), "amount": "-1"}).encode())
        )
    finally:
        client_module.client.close()
    assert created.status_code == 201
    assert created.data["id"]
    assert refused.status_code == 400


class _Flask:
    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, rule: str) -> Any:
        return lambda view: view


def test_the_flask_route(sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "flask", Flask=_Flask, jsonify=lambda **kw: kw)
    route = _run(FLASK, PAYMENTS_URL=sandbox.url)
    try:
        payment_id = route["client"].submit_credit_transfer(credit_transfer()).payments_service_id
        answer = route["payment_status"](payment_id)
    finally:
        _close_clients(route)
    assert answer == {"outcome": "accepted", "status": "ACCC"}


def test_the_celery_task(sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "celery", shared_task=lambda **options: lambda task: task)
    tasks = _run(CELERY, PAYMENTS_URL=sandbox.url)
    try:
        payment = credit_transfer()
        tasks["client"].submit_credit_transfer(payment)
        fields = {
            "original_end_to_end_id": payment.end_to_end_id,
            "amount": "12.34",
            "creditor_agent_bic": "COBADEFFXXX",
            "creditor_iban": "DE89370400440532013000",
            "assigner_bic": "BANKDEFFXXX",
            "assignee_bic": "BANKFRPPXXX",
            "reason": "DUPL",
            "assignment_id": "ASG-DOCS-1",
        }
        first = tasks["cancel_payment"](fields)
        again = tasks["cancel_payment"](fields)  # a retried task: the same message
    finally:
        _close_clients(tasks)
    assert first == again
    assert sandbox.server.stats()["cancellations_stored"] == 1


def test_the_script(sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]) -> None:
    script = _run(SCRIPT, PAYMENTS_URL=sandbox.url)
    assert sandbox.credentials is not None
    from payments_async import SyncPaymentsClient

    with SyncPaymentsClient(sandbox.credentials, base_url=sandbox.url) as client:
        payment = credit_transfer()
        client.submit_credit_transfer(payment)
        cxl = client.request_cancellation(cancellation_for(payment))
    script["main"]([cxl.payments_service_id])
    out = capsys.readouterr().out
    service_id, outcome = out.split()
    assert service_id == cxl.payments_service_id
    assert outcome in {"accepted", "rejected"}


def test_the_fixture_example(request: pytest.FixtureRequest) -> None:
    assert 'pytest_plugins = ["payments_async.testing"]' in CONFTEST

    def my_transfer() -> Pacs008:
        return credit_transfer()

    example = _run(TEST_PAY, my_transfer=my_transfer)
    example["test_pay"](
        request.getfixturevalue("payments_sync_client"),
        request.getfixturevalue("payments_sync_sandbox"),
    )
