"""Reliability suite: print every figure the tests measured at the end of the run."""

from __future__ import annotations

from typing import Any

from tests.support.reliability import FIGURES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for section in sorted(FIGURES):
        figures = ", ".join(f"{k}={v}" for k, v in FIGURES[section].items())
        terminalreporter.write_line(f"{section}: {figures}")
