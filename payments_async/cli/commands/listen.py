"""``payments-async listen``: receive status notifications, confirm and print each one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import click
from rich.text import Text

from payments_async import redact_url
from payments_async.notifications import (
    NOTIFY_PATH,
    Authenticator,
    BasicAuth,
    BearerAuth,
    InboxBusyError,
    InboxStatus,
    JwtBearerVerifier,
    NotificationEvent,
    NotificationReceiver,
    ReceiverServer,
    ServerLimits,
    SqliteInbox,
    Sweep,
    open_inbox,
)

from .._context import Settings, pass_settings
from .._defaults import ENV_NOTIFY_PASSWORD
from .._exit import EXIT_OK, CliError
from .._files import read_file
from .._params import seconds
from .._run import connected, run_command

__all__ = ["listen"]

DEFAULT_INBOX = "payments-notifications.db"


def _is_file(target: str) -> bool:
    return not target.startswith(("postgresql://", "postgres://"))


async def _inbox_status(target: str) -> InboxStatus:
    if _is_file(target):  # read beside the receiver that holds it, without its lock
        return await SqliteInbox(target).status()
    inbox = open_inbox(target)
    await inbox.open()
    try:
        return await inbox.status()
    finally:
        await inbox.aclose()


async def _track_pending(settings: Settings, receiver: NotificationReceiver, journal: str) -> None:
    from payments_async.bulk import JournalError, awaited_cancellations

    try:
        awaited = await asyncio.to_thread(awaited_cancellations, journal)
    except JournalError as exc:
        raise CliError(str(exc)) from None
    for psid in awaited:
        await receiver.track(psid, "cancellation")
    if settings.json:
        settings.emit({"tracking": len(awaited), "journal": redact_url(journal)})
    else:
        settings.say(f"tracking {len(awaited)} cancellations {redact_url(journal)} awaits")


def _say_status(settings: Settings, target: str, status: InboxStatus) -> None:
    oldest = status.oldest_undone_at
    age = None if oldest is None else max(0.0, time.time() - oldest)
    if settings.json:
        settings.emit(
            {
                "inbox": redact_url(target),
                "depth": status.depth,
                "failed": status.failed,
                "delivered": status.delivered,
                "oldest_undone_age_s": None if age is None else round(age, 3),
                "last_error": status.last_error,
                "tracked": status.tracked,
            }
        )
        return
    settings.say(f"inbox {redact_url(target)}")
    settings.say(f"  waiting: {status.depth}" + ("" if age is None else f" (oldest {age:.1f} s)"))
    style = "red" if status.failed else ""
    settings.say(Text(f"  failed callbacks (parked): {status.failed}", style=style))
    if status.last_error:
        settings.say(Text(f"  last error: {status.last_error}", style=style))
    settings.say(f"  delivered: {status.delivered}")
    settings.say(f"  tracked, not final yet: {status.tracked}")


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
@click.option("--port", type=click.IntRange(0, 65535), help="0: any free port (required).")
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
@click.option(
    "--inbox",
    default=DEFAULT_INBOX,
    show_default=True,
    help="Where accepted notifications wait: a SQLite file or a postgresql:// address "
    "(shared by several listeners).",
)
@click.option(
    "--track-pending",
    "track_pending",
    metavar="JOURNAL",
    help="Track every cancellation a bulk journal (file or postgresql://) still awaits: "
    "the sweep reads those not notified within --sweep-grace.",
)
@click.option(
    "--sweep-grace",
    type=click.FloatRange(min=0.1, max=86_400),
    callback=seconds,
    default=60.0,
    show_default=True,
    help="Seconds a tracked id may go without a notification before it is read.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    callback=seconds,
    default=ServerLimits().header_timeout,
    show_default=True,
    help="Seconds a new connection has to send its request line and headers; then it is "
    "closed without an answer (slow callers cannot hold connections).",
)
@click.option(
    "--stalled-after",
    type=click.FloatRange(min=0.5),
    callback=seconds,
    metavar="S",
    help="A postgresql:// inbox: a listener silent this long is taken for dead and its "
    "notifications are processed by another one [default: PostgresInbox's lease, 60].",
)
@click.option(
    "--status",
    "show_status",
    is_flag=True,
    help="Print the inbox's depth, failed callbacks and oldest waiting item, then exit.",
)
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
    inbox: str,
    track_pending: str | None,
    sweep_grace: float,
    header_timeout: float,
    stalled_after: float | None,
    show_status: bool,
) -> None:
    """Receive status notifications; print each one and its confirmed status.

    Every notification is committed to the inbox before it is answered, and confirmed
    with a signed GET before it is printed as final; duplicates are marked. What a
    stopped listener had accepted is processed when it starts again. --json prints one
    object per line. Stop with Ctrl-C or SIGTERM (exit 130), or with --count (exit 0).
    """
    if stalled_after is not None and _is_file(inbox):
        # One listener per SQLite inbox: nobody would take its notifications over.
        raise click.UsageError("--stalled-after needs a postgresql:// --inbox")
    if show_status:
        missing = _is_file(inbox) and not Path(inbox).is_file()

        async def status() -> int:
            if missing:
                raise CliError(f"no inbox at {inbox!r} (give --inbox)")
            _say_status(settings, inbox, await _inbox_status(inbox))
            return EXIT_OK

        run_command(settings, status)
    if port is None:
        raise click.UsageError("Missing option '--port'.")
    if not path.startswith("/"):
        raise click.BadParameter("must start with /", param_hint="--path")
    limits = ServerLimits(header_timeout=header_timeout)

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

        # One receiver per SQLite inbox: a second one is refused here, before it binds.
        # A PostgreSQL inbox's lease is its own default unless given (never for SQLite).
        store = (
            open_inbox(inbox) if stalled_after is None else open_inbox(inbox, lease=stalled_after)
        )
        try:
            await store.open()
        except InboxBusyError as exc:
            raise CliError(str(exc)) from None
        try:
            async with connected(settings) as client:  # credentials checked before listening
                receiver = NotificationReceiver(
                    client,
                    auth=auth,
                    on_event=on_event,
                    inbox=store,
                    sweep=Sweep(grace=sweep_grace),
                )
                try:
                    server = ReceiverServer(
                        receiver, host=host, port=port, path=path, limits=limits
                    )
                    await server.start()
                except OSError as exc:
                    raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
                try:
                    async with receiver:
                        if settings.json:
                            settings.emit({"listening": server.url, "inbox": redact_url(inbox)})
                        else:
                            settings.say(
                                f"listening on {server.url}, inbox {redact_url(inbox)} "
                                "(Ctrl-C to stop)"
                            )
                        if track_pending is not None:
                            await _track_pending(settings, receiver, track_pending)
                        await done.wait()  # or SIGINT/SIGTERM: exit 130 (see run_command)
                finally:
                    await server.stop()
        finally:
            await store.aclose()
        return EXIT_OK

    run_command(settings, go)
