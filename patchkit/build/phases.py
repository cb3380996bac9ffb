"""The seconds of a piece of work's parts, each from the end of the one before."""

from __future__ import annotations

import time


class Phases:
    """name -> seconds, each lap from the end of the one before (the first from `t0`, or from now); a name
    lapped again adds up. `digits`: each sum rounded to that many decimals (None: not rounded)."""

    def __init__(self, t0: float | None = None, digits: int | None = 1):
        self.last = time.monotonic() if t0 is None else t0
        self.digits = digits
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        total = self.phases.get(name, 0.0) + now - self.last
        self.phases[name] = total if self.digits is None else round(total, self.digits)
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{k} {v:.1f} s" for k, v in self.phases.items())
