"""``payments-async keygen``: a new RSA key pair, and what to register with the service."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click
from rich.text import Text

from payments_async import (
    DEFAULT_KEYGEN_BITS,
    MIN_RSA_BITS,
    ConfigurationError,
    check_key_id_and_issuer,
    generate_key_pair,
)

from .._context import Settings, pass_settings
from .._defaults import CLI_MAX_KEYGEN_BITS
from .._exit import EXIT_USAGE
from .._run import fail

__all__ = ["keygen"]


def _kid_for(pem: bytes) -> str:
    der = "".join(pem.decode("ascii").strip().splitlines()[1:-1])
    return "kid-" + hashlib.sha256(der.encode("ascii")).hexdigest()[:16]


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(),
    show_default=True,
    help="Where to write <name>-private.pem and <name>-public.pem.",
)
@click.option("--name", default="client", show_default=True, help="File name stem.")
@click.option(
    "--bits",
    type=click.IntRange(min=MIN_RSA_BITS, max=CLI_MAX_KEYGEN_BITS),
    default=DEFAULT_KEYGEN_BITS,
    show_default=True,
    help=f"RSA modulus size, {MIN_RSA_BITS} to {CLI_MAX_KEYGEN_BITS}.",
)
@click.option("--kid", help="Key id to register (default: from the key's fingerprint).")
@click.option("--iss", default=None, help="Issuer to register (default: the --name).")
@pass_settings
def keygen(
    settings: Settings, directory: Path, name: str, bits: int, kid: str | None, iss: str | None
) -> None:
    """Write a new RSA key pair and print what to register with the service.

    The private key file is created with mode 0600 and never overwritten. Register the
    public key PEM together with the kid and iss printed here; use the same values in
    your credentials file.
    """
    try:
        # Checked before the key is made: a kid or iss the service would refuse wastes it.
        check_key_id_and_issuer(kid or "kid", iss or name)
    except ConfigurationError as exc:
        fail(
            settings,
            f"{exc.message}: check --kid and --iss (iss is --name unless given)",
            EXIT_USAGE,
        )
    try:
        files = generate_key_pair(directory, name=name, bits=bits)
    except ConfigurationError as exc:
        fail(settings, exc.message, EXIT_USAGE)
    pem = files.public_key_path.read_bytes()  # the SubjectPublicKeyInfo PEM to register
    kid = kid or _kid_for(pem)
    iss = iss or name
    if settings.json:
        settings.emit(
            {
                "private_key_file": str(files.private_key_path),
                "public_key_file": str(files.public_key_path),
                "bits": bits,
                "kid": kid,
                "iss": iss,
                "public_key_pem": pem.decode("ascii"),
            }
        )
        return
    say = settings.say
    say(f"Wrote an RSA-{bits} key pair:")
    say(f"  private key  {files.private_key_path}  (mode 0600: keep it secret)")
    say(f"  public key   {files.public_key_path}")
    say("")
    say("Register with the service:")
    say(f"  kid  {kid}")
    say(f"  iss  {iss}")
    say("  public key (PEM, unencrypted, SubjectPublicKeyInfo):")
    say(Text(pem.decode("ascii").rstrip()))
    say("")
    say("Then a credentials file (JSON) for --credentials:")
    example = {
        "client_id": "<your client id>",
        "client_secret": "<your client secret>",
        "key_id": kid,
        "issuer": iss,
        "private_key_file": str(files.private_key_path),
    }
    say(Text(json.dumps(example, indent=2)))
