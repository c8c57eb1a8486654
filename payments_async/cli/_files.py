"""Files a person gives the command line: credentials, JSON input, a results file to write."""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from payments_async import ConfigurationError, Credentials, ServiceProfile, check_key_id_and_issuer
from payments_async.bulk._input import DuplicateKeyError, unique_keys
from payments_async.signing import KeySigner, Pkcs11Signer, Signer, ThreadPoolSigner

from ._defaults import CLI_MAX_FILE_BYTES, CLI_MAX_JSON_DEPTH, ENV_CREDENTIALS
from ._exit import CliError

if TYPE_CHECKING:
    from ._context import Settings

__all__ = [
    "check_results_path",
    "close_signer",
    "credentials",
    "json_type",
    "load_credentials_file",
    "load_json_bytes",
    "not_utf8",
    "read_file",
    "read_json_file",
]


def load_credentials_file(path: Path) -> Credentials:
    """Credentials from a JSON or TOML file.

    Keys: ``client_id``, ``client_secret``, ``key_id``, ``issuer``, and where the signing
    key is, one of:

    * ``private_key_file``: an unencrypted RSA PEM (a relative path is read from the
      file's directory), signed with in this process; with ``signing_threads = N``, on N
      worker threads (`payments_async.signing.ThreadPoolSigner`);
    * a ``pkcs11`` table: ``library``, ``token_label``, ``key_label`` and ``pin`` (or
      ``pin_file``): the key stays in the HSM
      (`payments_async.signing.Pkcs11Signer`, extra ``pkcs11``).

    A TOML file may put them all in a ``[credentials]`` table.

    Raises:
        CliError: the file is unreadable, malformed or incomplete.
        ConfigurationError: the key is unusable (or the HSM refuses the PIN, has no such
            token or key).
    """
    data = _credentials_document(path)
    what = f"credentials file {str(path)!r}"
    _check_text(what, data, ("client_id", "client_secret", "key_id", "issuer"), required=True)
    _check_text(what, data, ("private_key_file",), required=False)
    try:  # before a key file is read or an HSM opened
        check_key_id_and_issuer(data["key_id"], data["issuer"])
    except ConfigurationError as exc:
        raise CliError(f"{what}: {exc.message}") from None
    misplaced = sorted(k for k in _PKCS11_KEYS if k in data)
    if misplaced:
        raise CliError(f"{what}: {', '.join(misplaced)} belong(s) in the pkcs11 table")
    hsm = data.get("pkcs11")
    if ("private_key_file" in data) == (hsm is not None):
        raise CliError(
            f"{what}: give the signing key as exactly one of private_key_file and a pkcs11 "
            f"table, not {'both' if hsm is not None else 'neither'}"
        )
    threads = data.get("signing_threads")
    if threads is not None and hsm is not None:
        raise CliError(f"{what}: signing_threads goes with private_key_file, not a pkcs11 table")
    if threads is not None and (type(threads) is not int or threads < 1):
        raise CliError(f"{what}: signing_threads must be a whole number >= 1")
    key_id = data["key_id"]
    signer: Signer
    if hsm is not None:
        signer = _pkcs11_signer(what, path, hsm, key_id)
    else:
        key_file = _relative_to(path, data["private_key_file"])
        read_file(key_file, "private_key_file", within=what)  # bounded, before the key loader
        if threads is None:
            signer = KeySigner(key_file, key_id=key_id)
        else:
            signer = ThreadPoolSigner(key_file, key_id=key_id, max_workers=threads)
    try:
        return Credentials(
            data["client_id"],
            data["client_secret"],
            key_id=key_id,
            issuer=data["issuer"],
            signer=signer,
        )
    except BaseException:
        close_signer(signer)
        raise


def _credentials_document(path: Path) -> dict[str, Any]:
    """The object of a JSON or TOML credentials file (a TOML file's ``[credentials]``)."""
    raw = read_file(path, "credentials file")
    data: object
    if path.suffix.lower() == ".toml":
        try:
            document = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CliError(f"credentials file {str(path)!r} {not_utf8(exc)}") from None
        except (ValueError, RecursionError) as exc:
            raise CliError(f"credentials file {str(path)!r} is not valid TOML: {exc}") from None
        data = document.get("credentials", document)
    else:
        data = load_json_bytes(raw, f"credentials file {str(path)!r}")
    if not isinstance(data, dict):
        raise CliError(f"credentials file {str(path)!r} must hold an object")
    return data


def service_profile(settings: Settings) -> ServiceProfile:
    """The service's edition: the ``profile`` table of the credentials file, each
    ``--profile FIELD=VALUE`` over it; the spec's when neither names a field.

    Raises:
        CliError: the table is not one, or names a field or a value the profile refuses.
    """
    items: list[str] = []
    if settings.credentials_file is not None and not settings.sandbox:
        path = settings.credentials_file
        table = _credentials_document(path).get("profile", {})
        if not isinstance(table, dict):
            raise CliError(f"credentials file {str(path)!r}: profile must be a table")
        items = [f"{name}={value}" for name, value in table.items()]
    try:
        return ServiceProfile.parse([*items, *settings.profile])
    except ConfigurationError as exc:
        raise CliError(f"profile: {exc.message}") from None


def _check_text(
    what: str, data: Mapping[str, object], keys: Sequence[str], *, required: bool
) -> None:
    """Every one of ``keys`` present is text; with ``required``, each is there and not empty."""
    wrong = [
        f"{k} must be text, not {json_type(data[k])}"
        for k in keys
        if k in data and not isinstance(data[k], str)
    ]
    if wrong:
        raise CliError(f"{what}: {'; '.join(wrong)}")
    missing = [k for k in keys if (required or k in data) and not data.get(k)]
    if missing:
        raise CliError(f"{what} lacks: {', '.join(missing)}")


def _relative_to(path: Path, name: str) -> Path:
    """``name`` as a path; a relative one is taken from the directory of the file ``path``."""
    found = Path(name).expanduser()
    return found if found.is_absolute() else path.parent / found


_PKCS11_KEYS: Final = ("library", "token_label", "key_label", "pin", "pin_file")


def _pkcs11_signer(what: str, path: Path, hsm: object, key_id: str) -> Signer:
    """The signer of a credentials file's ``pkcs11`` table (the PIN never in a message)."""
    if not isinstance(hsm, dict):
        kind = "text" if isinstance(hsm, str) else json_type(hsm)
        raise CliError(f"{what}: pkcs11 must be a table, not {kind}")
    what = f"{what}, pkcs11"
    if "pin" in hsm and not isinstance(hsm["pin"], str):
        raise CliError(f'{what}: pin must be text (quote it: pin = "1234")')
    _check_text(what, hsm, ("library", "token_label", "key_label"), required=True)
    _check_text(what, hsm, ("pin", "pin_file"), required=False)
    unknown = sorted(set(hsm) - set(_PKCS11_KEYS))
    if unknown:
        raise CliError(f"{what}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    if ("pin" in hsm) == ("pin_file" in hsm):
        raise CliError(f"{what}: give the token's PIN as exactly one of pin and pin_file")
    pin = hsm.get("pin")
    if pin is None:
        pin_path = _relative_to(path, hsm["pin_file"])
        try:
            # A BOM is not part of a PIN.
            pin = read_file(pin_path, "pin_file", within=what).decode("utf-8-sig").strip()
        except UnicodeDecodeError as exc:
            raise CliError(f"{what}: pin_file {str(pin_path)!r} {not_utf8(exc)}") from None
        if not pin:
            raise CliError(f"{what}: pin_file {str(pin_path)!r} is empty")
    return Pkcs11Signer(
        Path(hsm["library"]).expanduser(),  # as given: a bare name is the loader's to find
        token_label=hsm["token_label"],
        key_label=hsm["key_label"],
        pin=pin,
        key_id=key_id,
    )


def close_signer(signer: object) -> None:
    """Close a signer that holds threads or an HSM session (a KeySigner holds neither)."""
    close = getattr(signer, "close", None)
    if callable(close):
        close()


def json_type(value: object) -> str:
    """How a JSON/TOML value's type reads to a person."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def not_utf8(exc: UnicodeDecodeError) -> str:
    return (
        f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
        "save it as UTF-8"
    )


def _depth(value: object) -> int:
    """Nesting depth of decoded JSON, without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _text_depth(text: str) -> int:
    """Nesting depth of JSON text, read before parsing it (no deep recursion to unwind)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def load_json_bytes(raw: bytes, what: str) -> object:
    """Decode JSON from a file given by a person; every way it can be wrong is a CliError.

    Args:
        raw: the file's bytes (UTF-8, a BOM allowed).
        what: how to name the file in the message.

    Raises:
        CliError: not UTF-8, not JSON, an object naming a key twice, or nested deeper
            than ``CLI_MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {not_utf8(exc)}") from None
    if _text_depth(text) > CLI_MAX_JSON_DEPTH:
        raise CliError(f"{what} is nested more than {CLI_MAX_JSON_DEPTH} levels deep")
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise CliError(f"{what} is nested too deeply to be read") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from None
    except DuplicateKeyError as exc:  # which of the two values is meant is unclear
        raise CliError(f"{what}: {exc}") from None
    except ValueError:  # int(): more than 4,300 digits
        raise CliError(f"{what} is not valid JSON: a number has too many digits") from None
    if _depth(value) > CLI_MAX_JSON_DEPTH:
        raise CliError(f"{what} is nested more than {CLI_MAX_JSON_DEPTH} levels deep")
    return value


def credentials(settings: Settings) -> Credentials:
    if settings.credentials is None:
        settings.credentials = _read_credentials(settings)
    return settings.credentials


def _read_credentials(settings: Settings) -> Credentials:
    if settings.sandbox:
        return Credentials.sandbox()
    if settings.credentials_file is not None:
        return load_credentials_file(settings.credentials_file)
    try:
        return Credentials.from_env()
    except ConfigurationError as exc:
        raise CliError(
            f"{exc.message}; pass --credentials FILE (or set {ENV_CREDENTIALS}), set the "
            "PAYMENTS_* variables, or use --sandbox for the sandbox's predefined client"
        ) from None


def read_file(
    path: Path, what: str = "", limit: int = CLI_MAX_FILE_BYTES, *, within: str = ""
) -> bytes:
    """The bytes of a file a person names, read only if it holds at most ``limit`` bytes.

    A regular file's size is checked before anything is read; a device or a pipe
    (``/dev/zero``, ``<(cat ...)``) is read up to ``limit`` bytes and refused if more
    follow. A UTF-8 byte order mark is left in place (decoders here accept it).

    Args:
        path: the file.
        what: how the message names it (``"credentials file"``); the path follows.
        limit: the largest size accepted, in bytes (``CLI_MAX_FILE_BYTES``).
        within: what the file belongs to, to start the message with (the credentials
            file that names a PIN file).

    Raises:
        CliError: the file cannot be read, or holds more than ``limit`` bytes.
    """
    shown = f"{what} {str(path)!r}" if what else repr(str(path))
    start = f"{within}: " if within else ""
    too_big = CliError(
        f"{start}{shown} is larger than {limit // 1024:,} KiB (the most the command line reads "
        "whole): nothing was sent"
    )
    try:
        with path.open("rb") as file:
            info = os.fstat(file.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise too_big
            raw = file.read(limit + 1)
    except OSError as exc:
        raise CliError(f"{start}cannot read {shown}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise too_big
    return raw


def read_json_file(path: Path) -> bytes:
    """A JSON message file's bytes (at most ``CLI_MAX_FILE_BYTES``), without a UTF-8 BOM.

    Raises:
        CliError: see `read_file`.
    """
    return read_file(path).removeprefix(_BOM)


_BOM: Final = b"\xef\xbb\xbf"


def check_results_path(path: Path, option: str = "--results") -> None:
    """Refuse a results file the run could not write at its end, after sending every row.

    The results are written to a new file in the same folder, renamed over ``path``: the
    folder must take a new file, and ``path`` must not be a device or a pipe (the rename
    would replace it). ``option`` names the option that gave ``path``.

    Raises:
        CliError: ``path`` names no file, is not a regular file, or its folder cannot be
            written.
    """
    what = f"results file {str(path)!r}"
    if not path.name:
        raise CliError(f"{option} {str(path)!r} names no file")
    if path.exists() and not path.is_file():
        raise CliError(f"{what} is not a regular file: name a file for the results")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except (FileExistsError, NotADirectoryError):
        raise CliError(f"cannot write {what}: a file is where its folder should be") from None
    except OSError as exc:
        raise CliError(f"cannot write {what}: {exc.strerror}") from None
