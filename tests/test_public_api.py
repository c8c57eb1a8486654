"""The public surface is a contract: exactly these names, sorted, each importable."""

import ast
import importlib
import inspect
import itertools
import pkgutil
import types
from pathlib import Path

import pytest

import payments_async

DOCS = Path(__file__).resolve().parent.parent / "docs"

INTENDED = {
    "DEFAULT_KEYGEN_BITS",
    "EPC_ADDRESS_CUTOVER",
    "MIN_RSA_BITS",
    "POLL_TIMEOUT",
    "TOKEN_PATH",
    "Address",
    "Answered",
    "ApiError",
    "AuthenticationError",
    "Camt029",
    "Camt056",
    "CancellationOutcome",
    "ConfigurationError",
    "Credentials",
    "Hooks",
    "InvalidResponseError",
    "KeySigner",
    "Limits",
    "NotFoundError",
    "Outcome",
    "OutcomeUnknownError",
    "Pacs002",
    "Pacs008",
    "Pacs028",
    "PaymentStatus",
    "PaymentsClient",
    "PaymentsError",
    "Pkcs11Signer",
    "PermissionDeniedError",
    "PollPolicy",
    "PollTimeoutError",
    "Problem",
    "RateLimit",
    "RateLimitedError",
    "RateLimiter",
    "RawResponse",
    "RequestEvent",
    "RetryBudget",
    "RetryPolicy",
    "ServerError",
    "ServiceErrorDetail",
    "ServiceProfile",
    "Signer",
    "SigningError",
    "Submission",
    "SyncPaymentsClient",
    "Telemetry",
    "ThreadPoolSigner",
    "Timeout",
    "TransportError",
    "ValidationError",
    "build_cancellation",
    "build_credit_transfer",
    "build_status_request",
    "check_key_id_and_issuer",
    "check_payments_service_id",
    "generate_key_pair",
    "is_banking_day",
    "limit_rate",
    "recall_deadline",
    "redact_url",
}


def _ruff_order(name: str) -> tuple[int, str]:
    """The order ruff keeps ``__all__`` in (RUF022): constants, then classes, then the rest."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_exactly_the_sorted_intended_names() -> None:
    assert payments_async.__all__ == sorted(INTENDED, key=_ruff_order)
    assert _ruff_order("TOKEN_PATH") < _ruff_order("ApiError") < _ruff_order("build_cancellation")


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in payments_async.__all__:
        obj = getattr(payments_async, name)
        assert obj.__doc__, f"{name} has no docstring"


def test_every_error_derives_from_the_root() -> None:
    for name in payments_async.__all__:
        obj = getattr(payments_async, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, payments_async.PaymentsError), name


def test_no_private_module_leaks_into_the_namespace() -> None:
    public = {n for n in vars(payments_async) if not n.startswith("_")}
    # subpackages users import explicitly are allowed beside __all__
    assert public - set(payments_async.__all__) <= {
        "iso20022",
        "loop",
        "sandbox",
        "testing",
        "bulk",
        "cli",
        "signing",
        "notifications",
        "sync",
    }


def test_every_module_imports_with_an_aiohttp_older_than_its_newest_names() -> None:
    """``pyproject`` allows aiohttp >= 3.9; ``DecompressSizeError`` exists from 3.13.3 on.

    A fresh process removes it before importing every module (an import of it by name
    once broke the sandbox, the receiver and ``payments_async.testing`` there).
    """
    import subprocess
    import sys

    script = (
        "import importlib, pkgutil, aiohttp.http_exceptions as h\n"
        "del h.DecompressSizeError\n"
        "import payments_async\n"
        "for m in pkgutil.walk_packages(payments_async.__path__, 'payments_async.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr


# The public modules beside the root, each's ``__all__`` exactly as intended. ``bulk`` is
# what a user of the runner needs (run a bulk cancellation, its journals, its results and
# outcome types, its errors, a journal's counts), not the planner's internals: the command
# line and the tests import those from the private module that defines them.
MODULES: dict[str, set[str]] = {
    "bulk": {
        "DEFAULT_CHASE_LIMIT",
        "DEFAULT_CONCURRENCY",
        "ChasePolicy",
        "ChaseReport",
        "RESULT_COLUMNS",
        "Action",
        "AlreadyRecalledError",
        "AttentionReport",
        "BulkCounts",
        "BulkEvents",
        "BulkInputError",
        "BulkReport",
        "ControlEvent",
        "ControlState",
        "EnqueueReport",
        "InputCheck",
        "Journal",
        "JournalBusyError",
        "JournalError",
        "JournalUnavailableError",
        "MemoryJournal",
        "PlannedRow",
        "ProgressSink",
        "QueueStatus",
        "Recall",
        "RecallLedger",
        "RefreshReport",
        "ResultsWriteError",
        "RowError",
        "RowOutcome",
        "RowState",
        "RunAbortedError",
        "RunControlError",
        "RunFinishedError",
        "RunNotFoundError",
        "RunPlan",
        "RunReport",
        "RunState",
        "RunTimes",
        "RunTotals",
        "SqliteJournal",
        "Stage",
        "Verdict",
        "awaited_cancellations",
        "bulk_cancel",
        "check_run_input",
        "connection_limit_for",
        "default_journal_path",
        "default_results_path",
        "enqueue_run",
        "execute_run",
        "journal_counts",
        "journal_status",
        "open_journal",
        "open_recall_ledger",
        "open_run",
        "plan_summary",
        "queue_status",
        "read_control",
        "read_results",
        "record_action",
        "refresh_pending",
        "run_report",
        "run_worker",
        "write_attention",
        "write_queue_results",
        "write_run_results",
    },
    "notifications": {
        "NOTIFY_PATH",
        "Authenticator",
        "BasicAuth",
        "BearerAuth",
        "Inbox",
        "InboxBusyError",
        "InboxError",
        "InboxFull",
        "InboxItem",
        "InboxStatus",
        "InboxUnavailableError",
        "JwtBearerVerifier",
        "MemoryInbox",
        "Notification",
        "NotificationEvent",
        "NotificationKind",
        "NotificationReceiver",
        "NotificationRejected",
        "PostgresInbox",
        "ReceiverLimits",
        "ReceiverServer",
        "ReceiverStats",
        "Retries",
        "ServerLimits",
        "SqliteInbox",
        "Sweep",
        "authenticate",
        "create_app",
        "open_inbox",
        "parse",
    },
    "iso20022": {
        "EPC_ADDRESS_CUTOVER",
        "RECALL_MESSAGE_NAME",
        "RECALL_WINDOWS",
        "REJECTION_REASONS",
        "Address",
        "Camt029",
        "Camt056",
        "CancellationRequest",
        "CancellationResolution",
        "CreditTransfer",
        "ErrorEnvelope",
        "ErrorItem",
        "GenericOrganisationIdentification",
        "OrganisationIdentificationSchemeName",
        "Outcome",
        "Pacs002",
        "Pacs008",
        "Pacs028",
        "Party",
        "PartyIdentification",
        "PartyOrganisationIdentification",
        "PaymentStatus",
        "RecallWindow",
        "RejectionReason",
        "Resolution",
        "StatusReport",
        "StatusRequest",
        "SubmissionResult",
        "TokenResponse",
        "Transliteration",
        "add_banking_days",
        "build_cancellation",
        "build_credit_transfer",
        "build_status_request",
        "check_lei",
        "classify_cancellation_status",
        "classify_payment_status",
        "decode_camt029",
        "decode_camt056",
        "decode_error_envelope",
        "decode_pacs002",
        "decode_pacs008",
        "decode_pacs028",
        "decode_submission",
        "decode_token_response",
        "encode",
        "encode_validated",
        "find_problems",
        "is_banking_day",
        "outside_sepa_set",
        "recall_deadline",
        "recall_window_problems",
        "return_request_needed",
        "summarize_resolution",
        "summarize_status_report",
        "target2_today",
        "transliterate",
        "validate",
    },
    "signing": {"KeySigner", "Pkcs11Signer", "Signer", "ThreadPoolSigner"},
    "sandbox": {
        "DEFAULT_AMOUNT_LIMIT",
        "DEFAULT_PROCESSING_DELAY",
        "DEFAULT_SETTLEMENT_DELAY",
        "DEFAULT_TOKEN_LIFETIME",
        "REJECT_IBAN_AC04",
        "REJECT_IBAN_AC06",
        "SANDBOX_OPTIONS",
        "STATE_KEY",
        "ClientKey",
        "ErrorCode",
        "FaultConfig",
        "NotificationFaults",
        "NotificationSettings",
        "NotificationTarget",
        "SandboxConfig",
        "SandboxOption",
        "SandboxServer",
        "SandboxState",
        "ServerLimits",
        "create_app",
        "main",
        "run",
        "run_from_options",
    },
    "testing": {
        "ManualClock",
        "SandboxHandle",
        "generate_test_keypair",
        "sandbox_in_thread",
        "sandbox_server",
    },
    "sync": {"SyncPaymentsClient", "SyncWithResponse"},
    "loop": {"LOOP_CHOICES", "LoopKind", "loop_factory", "run"},
}


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(f"payments_async.{name}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_public_modules_all_is_exactly_the_sorted_intended_names(name: str) -> None:
    assert _module(name).__all__ == sorted(MODULES[name], key=_ruff_order)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_public_modules_names_are_ours_and_documented(name: str) -> None:
    """Classes and functions carry their own docstring; a constant or alias carries an
    attribute docstring (what mkdocs shows) or is named in the docs.

    No name is ``_``-prefixed, and every class and function is defined in this package
    (no dependency's name passed on as ours).
    """
    module = _module(name)
    docs = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    for public in module.__all__:
        obj = getattr(module, public)
        assert not public.startswith("_"), public
        if inspect.isclass(obj) or inspect.isroutine(obj):
            origin = getattr(obj, "__module__", "") or ""
            assert origin.startswith("payments_async"), f"{name}.{public} is {origin}'s"
            assert (obj.__doc__ or "").strip(), f"{name}.{public} has no docstring"
        else:
            assert public in docs or public in _attribute_docstrings(), (
                f"{name}.{public}: a constant nobody documents"
            )


def _attribute_docstrings() -> set[str]:
    """Names assigned at a module's top level with a docstring under them (as mkdocs shows)."""
    names: set[str] = set()
    for path in Path(payments_async.__file__).parent.rglob("*.py"):
        body = ast.parse(path.read_text()).body
        for node, after in itertools.pairwise(body):
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if (
                isinstance(target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                names.add(target.id)
    return names


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_public_modules_errors_derive_from_the_root(name: str) -> None:
    module = _module(name)
    for public in module.__all__:
        obj = getattr(module, public)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, payments_async.PaymentsError), f"{name}.{public}"


def _drawn_tree(text: str) -> dict[str, str]:
    """Each error's parent, from the indentation of the first text block of ``text``."""
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    tree = text.split("```text")[1].split("```")[0]
    root, *lines = tree.strip().splitlines()
    stack.append((-1, root.split()[0]))
    drawn[root.split()[0]] = ""
    for line in lines:
        if "── " not in line:
            continue  # a description's second line
        depth = line.index("── ")
        name = line[depth + 3 :].split()[0]
        while stack and stack[-1][0] >= depth:
            stack.pop()
        drawn[name] = stack[-1][1] if stack else ""
        stack.append((depth, name))
    return drawn


def _error_drawing(where: str) -> str:
    import payments_async._errors as errors

    return (errors.__doc__ or "") if where == "_errors.py" else (DOCS / where).read_text()


@pytest.mark.parametrize("where", ["_errors.py", "errors.md"])
def test_the_error_tree_drawn_is_every_error_under_the_root(where: str) -> None:
    """Each subclass of ``PaymentsError`` the package defines is drawn under its parent,
    in ``_errors.py``'s docstring and in ``docs/errors.md``."""
    for info in pkgutil.walk_packages(payments_async.__path__, "payments_async."):
        importlib.import_module(info.name)

    def below(cls: type) -> list[type]:
        return [s for c in cls.__subclasses__() for s in (c, *below(c))]

    actual = {c.__name__: c.__bases__[0].__name__ for c in below(payments_async.PaymentsError)}
    actual["PaymentsError"] = ""
    assert _drawn_tree(_error_drawing(where)) == actual


def test_the_tree_reader_sees_a_misplaced_error() -> None:
    text = "```text\nPaymentsError  root\n├── ApiError  x\n│   └── JournalError  y\n```"
    assert _drawn_tree(text) == {
        "PaymentsError": "",
        "ApiError": "PaymentsError",
        "JournalError": "ApiError",
    }
    assert _drawn_tree(text)["JournalError"] != _module("bulk").JournalError.__bases__[0].__name__


def _every_public_error() -> list[type[Exception]]:
    found = [
        obj
        for module in (payments_async, *(_module(name) for name in sorted(MODULES)))
        for name in module.__all__
        if isinstance(obj := getattr(module, name), type) and issubclass(obj, Exception)
    ]
    return sorted(set(found), key=lambda cls: cls.__name__)


def test_the_bulk_and_notification_errors_are_under_the_root() -> None:
    names = {cls.__name__ for cls in _every_public_error()}
    assert {
        "BulkInputError",
        "JournalError",
        "JournalUnavailableError",
        "JournalBusyError",
        "ResultsWriteError",
        "InboxError",
        "InboxFull",
        "InboxBusyError",
        "InboxUnavailableError",
        "NotificationRejected",
    } <= names
    assert all(issubclass(cls, payments_async.PaymentsError) for cls in _every_public_error())
