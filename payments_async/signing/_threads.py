"""The thread-pool signer: RSA work off the event loop, on spare cores."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import final

from .._constants import SIGNING_THREADS
from .._errors import ConfigurationError, SigningError
from .._keys import PrivateKeySource
from ._key import PKCS1, SHA_256, InProcessKey

__all__ = ["ThreadPoolSigner"]


@final
class ThreadPoolSigner(InProcessKey):
    """Signs with an in-process RSA key on worker threads, so the event loop keeps running.

    ``cryptography`` 47 and later release the GIL while OpenSSL signs, so the signatures
    run in parallel with the event loop and with each other: on a machine with spare
    cores, a client signing many requests at once gains throughput and the loop's latency
    no longer includes the RSA work. On one core it only adds a thread hop; use
    `payments_async.signing.KeySigner` there.

    `sign` returns an awaitable and must be called from a running event loop (the
    client does). Close the signer when done (``close()``, or use it as a context
    manager) if it owns its threads; a signer given an ``executor`` leaves it open.

    Args:
        private_key: an ``RSAPrivateKey``, PEM bytes or text, or a path to an unencrypted
            PEM file (checked: RSA, >= 2048 bits).
        key_id: the kid registered with the service for this key.
        max_workers: worker threads; default ``min(SIGNING_THREADS, os.cpu_count())``.
        executor: an executor to borrow instead of owning threads.

    Raises:
        ConfigurationError: a bad key, an empty kid, ``max_workers`` below 1, or both
            ``max_workers`` and ``executor``.
    """

    __slots__ = ("_closed", "_executor", "_owned")

    def __init__(
        self,
        private_key: PrivateKeySource,
        *,
        key_id: str,
        max_workers: int | None = None,
        executor: Executor | None = None,
    ) -> None:
        super().__init__(private_key, key_id=key_id)
        if executor is not None and max_workers is not None:
            raise ConfigurationError("pass either max_workers or executor, not both")
        if max_workers is None:
            max_workers = min(SIGNING_THREADS, os.cpu_count() or 1)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(f"max_workers must be an int >= 1, got {max_workers!r}")
        self._owned = executor is None
        self._executor: Executor = executor or ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="payments-async-signer"
        )
        self._closed = False

    def sign(self, data: bytes) -> asyncio.Future[bytes]:
        """RS256-sign ``data`` on a worker thread.

        Args:
            data: the JWS signing input.

        Returns:
            A future of the signature bytes, bound to the running loop.

        Raises:
            SigningError: the signer is closed.
            RuntimeError: no event loop is running in this thread.
        """
        if self._closed:
            raise SigningError(f"the ThreadPoolSigner for kid {self._key_id!r} is closed")
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, self._key.sign, data, PKCS1, SHA_256)

    def close(self) -> None:
        """Stop the owned worker threads (after the signatures in progress). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owned:
            self._executor.shutdown(wait=True)

    def __enter__(self) -> ThreadPoolSigner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"ThreadPoolSigner(key_id={self._key_id!r}, key=RSA-{self._key.key_size}){state}"
