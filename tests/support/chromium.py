"""A headless Chromium driven over the DevTools protocol on a pipe, for tests of pages.

Debian's ``chromium`` package, nothing downloaded: ``.ci/run`` installs it where it can.
The browser reads the protocol's commands on its fd 3 and writes answers and events on
its fd 4 (``--remote-debugging-pipe``), each a JSON object ended by a NUL byte.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get update && apt-get install -y chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def chromium_or_skip() -> str:
    """The browser's path; the test skips, naming the install command, without it."""
    path = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if path is None:
        pytest.skip(f"Debian's chromium is not installed: {INSTALL}")
    return path


@dataclass
class PageLoad:
    """What happened while a page loaded: console errors, exceptions, requests."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


class Chromium:
    """One headless browser with one page; a context manager that ends the browser."""

    def __init__(self, path: str, timeout: float = 60.0) -> None:
        self._timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="pa-chromium-")
        self._log = Path(self._profile) / "stderr.log"
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        stderr = os.open(self._log, os.O_WRONLY | os.O_CREAT, 0o600)
        argv = [path, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"]
        # posix_spawn, not fork: the test process runs a sandbox in a thread.
        self._pid = os.posix_spawn(
            path,
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, to_browser_r, 3),
                (os.POSIX_SPAWN_DUP2, from_browser_w, 4),
                (os.POSIX_SPAWN_DUP2, stderr, 2),
            ],
        )
        for fd in (to_browser_r, from_browser_w, stderr):
            os.close(fd)
        self._buf = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        self._session = ""

    def __enter__(self) -> Chromium:
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self._to_browser)
        try:
            os.kill(self._pid, signal.SIGTERM)
            os.waitpid(self._pid, 0)
        finally:
            os.close(self._from_browser)
            shutil.rmtree(self._profile, ignore_errors=True)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise EOFError(f"chromium ended: {self._log.read_text(errors='replace')[-2000:]}")
            self._buf += chunk
        message, _, self._buf = self._buf.partition(b"\0")
        result: dict[str, Any] = json.loads(message)
        return result

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        """Send one command and return its result (events met meanwhile are kept)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            answer = self._receive()
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer["result"]
                return result
            self._events.append(answer)
        raise TimeoutError(method)

    def load(self, url: str) -> PageLoad:
        """Open ``url`` and wait for its load event; what the page met on the way."""
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + self._timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            self._events.append(self._receive())
        self.call("Runtime.evaluate", {"expression": "1"}, session=True)  # events flushed
        seen = PageLoad()
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                seen.errors.append(json.dumps(params["args"]))
            elif method == "Runtime.exceptionThrown":
                seen.errors.append(json.dumps(params["exceptionDetails"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                seen.errors.append(params["entry"]["text"])
            elif method == "Network.requestWillBeSent":
                seen.requests.append(params["request"]["url"])
        return seen

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"]))
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page."""
        data = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True
        )["data"]
        path.write_bytes(base64.b64decode(data))
        return path
