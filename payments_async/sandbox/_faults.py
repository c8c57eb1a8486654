"""Seeded fault drawing: which fault (if any) a request gets, repeatable for one seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from ._config import FaultConfig

__all__ = ["FAULT_KINDS", "FaultDecision", "FaultInjector"]

FAULT_KINDS: Final = (
    "error_500",
    "error_502",
    "error_503",
    "rate_limit_429",
    "drop_before",
    "commit_then_drop",
    "latency",
    "accepted_202",
    "accepted_202_empty",
    "no_content_204",
)


@dataclass(frozen=True, slots=True)
class FaultDecision:
    """What to do to one request.

    Attributes:
        kind: one of the exclusive kinds, or None for "handle normally".
        delay: seconds to wait before handling (the latency fault), 0 for none.
    """

    kind: str | None
    delay: float


_NO_FAULT: Final = FaultDecision(None, 0.0)


class FaultInjector:
    """Draws faults from a ``random.Random(seed)``; the same seed gives the same sequence.

    Two draws per request when faults are on (one for the exclusive kinds, one for
    latency); none at all when they are off, so the default costs nothing.
    """

    def __init__(self, config: FaultConfig) -> None:
        self._config = config
        self._rng = random.Random(config.seed)
        self._cumulative = self._build(config)
        self._enabled = config.enabled

    @staticmethod
    def _build(config: FaultConfig) -> tuple[tuple[float, str], ...]:
        total = 0.0
        out: list[tuple[float, str]] = []
        for kind, share in config.exclusive_shares():
            if share > 0:
                total += share
                out.append((total, kind))
        return tuple(out)

    @property
    def config(self) -> FaultConfig:
        """The settings in force."""
        return self._config

    def configure(self, config: FaultConfig) -> None:
        """Replace the settings and reseed from ``config.seed``."""
        self._config = config
        self._rng = random.Random(config.seed)
        self._cumulative = self._build(config)
        self._enabled = config.enabled

    def applies(self, is_token_route: bool) -> bool:
        """True when faults may fire on this kind of route."""
        return self._enabled and (not is_token_route or self._config.apply_to_token)

    def draw(self) -> FaultDecision:
        """The fault for the next request."""
        cfg = self._config
        if not self._enabled:
            return _NO_FAULT
        u = self._rng.random()
        kind: str | None = None
        for bound, name in self._cumulative:
            if u < bound:
                kind = name
                break
        delay = cfg.latency_seconds if cfg.latency > 0 and self._rng.random() < cfg.latency else 0.0
        return FaultDecision(kind, delay)
