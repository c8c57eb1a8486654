"""``payments-async listen``: receive status notifications, confirm and print each one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.text import Text

from payments_async.notifications import (
    NOTIFY_PATH,
    Authenticator,
    BasicAuth,
    BearerAuth,
    JwtBearerVerifier,
    NotificationEvent,
    NotificationReceiver,
    ReceiverServer,
)

from .._context import Settings, pass_settings
from .._defaults import ENV_NOTIFY_PASSWORD
from .._exit import EXIT_OK, CliError
from .._files import read_file
from .._run import connected, run_command

__all__ = ["listen"]


def _listen_auth(
    user: str | None,
    password: str | None,
    jwt_key: Path | None,
    issuer: str | None,
    audience: str | None,
) -> Authenticator:
    if (user is None) == (jwt_key is None):
        raise CliError(
            "give --user (with --password or PAYMENTS_NOTIFY_PASSWORD) for HTTP Basic, or "
            "--jwt-key with --issuer and --audience for OAuth 2.0 bearer JWTs (only one)"
        )
    if user is not None:
        if not password:
            raise CliError("--user needs --password or PAYMENTS_NOTIFY_PASSWORD")
        return BasicAuth(user, password)
    if not issuer or not audience:
        raise CliError("--jwt-key needs --issuer and --audience")
    assert jwt_key is not None
    return BearerAuth(
        JwtBearerVerifier(read_file(jwt_key, "--jwt-key"), issuer=issuer, audience=audience)
    )


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True, help="0: any free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--path", default=NOTIFY_PATH, show_default=True, help="Route of the receiver.")
@click.option("--user", help="HTTP Basic user name the service presents.")
@click.option(
    "--password",
    envvar=ENV_NOTIFY_PASSWORD,
    help="Its password (better: env PAYMENTS_NOTIFY_PASSWORD).",
)
@click.option(
    "--jwt-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM public key (RSA or EC P-256) verifying bearer JWTs instead of Basic.",
)
@click.option("--issuer", help="Required iss of bearer JWTs.")
@click.option("--audience", help="Required aud of bearer JWTs.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many notifications.")
@pass_settings
def listen(
    settings: Settings,
    port: int,
    host: str,
    path: str,
    user: str | None,
    password: str | None,
    jwt_key: Path | None,
    issuer: str | None,
    audience: str | None,
    count: int | None,
) -> None:
    """Receive status notifications; print each one and its confirmed status.

    Every notification is confirmed with a signed GET before it is printed as final;
    duplicates are marked. --json prints one object per line. Stop with Ctrl-C or
    SIGTERM (exit 130), or with --count (exit 0).
    """
    if not path.startswith("/"):
        raise click.BadParameter("must start with /", param_hint="--path")

    async def go() -> int:
        auth = _listen_auth(user, password, jwt_key, issuer, audience)
        done = asyncio.Event()
        seen = 0

        async def on_event(event: NotificationEvent) -> None:
            nonlocal seen
            n = event.notification
            record = {
                "payments_service_id": n.payments_service_id,
                "kind": n.kind.value,
                "payload": n.payload,
                "confirmed_status": event.status,
                "outcome": event.outcome.value,
                "final": event.final,
                "first": event.first,
            }
            if event.error is not None:
                record["error"] = str(event.error)
            if settings.json:
                settings.emit(record)
            else:
                note = "" if event.first or not event.final else " (already delivered)"
                what = f"{n.kind.value} {n.payments_service_id} ({n.payload})"
                if event.error is not None:
                    settings.say(Text(f"{what}: not confirmed: {event.error}", style="red"))
                else:
                    state = "final" if event.final else "not final"
                    settings.say(
                        f"{what}: confirmed {event.status} ({event.outcome.value}, {state}){note}"
                    )
            seen += 1
            if (count is not None and seen >= count) or settings.output_lost:
                done.set()  # a reader gone (`listen | head -1`) ends the command: exit 0

        async with connected(settings) as client:  # credentials checked before listening
            receiver = NotificationReceiver(client, auth=auth, on_event=on_event)
            try:
                server = ReceiverServer(receiver, host=host, port=port, path=path)
                await server.start()
            except OSError as exc:
                raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            try:
                async with receiver:
                    if settings.json:
                        settings.emit({"listening": server.url})
                    else:
                        settings.say(f"listening on {server.url} (Ctrl-C to stop)")
                    await done.wait()  # or SIGINT/SIGTERM: exit 130 (see run_command)
            finally:
                await server.stop()
        return EXIT_OK

    run_command(settings, go)
