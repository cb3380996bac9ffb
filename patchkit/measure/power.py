"""GPU power during each timed process (issue 35): a hook (patchkit.measure.hooks).

nvidia-smi samples GPU 0's power.draw every 100 ms in the background while the process runs
(`nvidia-smi --query-gpu=timestamp,power.draw --format=csv,noheader,nounits --id=0 -lms 100`, through
`proc.sampling`), logged like any tool run (raw/power-<step>-<tag>.log), so a replay reads the same samples.
nvidia-smi rather than NVML (pynvml): no new dependency, the same tool as the clocks hook, and a raw log
every number traces to. Per process: the mean and max W and the energy (the samples integrated over their
timestamps); with the process's tokens (bench:decode), joules per token: the whole process's energy (model
load and warm-up included) over the tokens it generated and processed. On a CPU run the hook does not apply
(nothing stored, nothing said); without nvidia-smi that is said once.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit import proc
from patchkit.errors import ParseError
from patchkit.measure.clocks import nvidia_smi_here
from patchkit.measure.tool import completed_from_log
from patchkit.parsers import nvidia_smi
from patchkit.results import Bundle
from patchkit.results.data.base import ABSENT, Data

NOT_RECORDED = "GPU power not recorded: no nvidia-smi on this machine"


@dataclass(kw_only=True)
class PowerRun(Data):
    """One timed process's power samples (raw/power-...log)."""

    round: int  # the round of the process
    label: str  # the binary (variant; base#2 the A/A copy)
    samples: int  # power.draw readings during the process
    mean_w: float | None  # None: no reading (power.draw [N/A])
    max_w: float | None
    energy_j: float | None  # the readings integrated over their timestamps (trapezoids)
    tokens: int | None = ABSENT  # tokens the process generated and processed (bench:decode only)
    j_per_token: float | None = ABSENT  # energy_j / tokens
    log: str  # the raw log, relative to the run folder


@dataclass(kw_only=True)
class PowerData(Data):
    """GPU power during each timed process of a step."""

    runs: list[PowerRun]
    note: str  # why power was not sampled ('' when it was)


def reading(samples: list[nvidia_smi.PowerSample]) -> dict[str, Any]:
    """Mean, max W and energy of one process's samples (seconds past midnight: a window that crosses it
    is unwrapped)."""
    pts, day = [], 0.0
    for s in samples:
        if pts and s.seconds + day < pts[-1][0] - 3600:
            day += 86400.0
        if s.power_w is not None:
            pts.append((s.seconds + day, s.power_w))
    if not pts:
        return {"samples": 0, "mean_w": None, "max_w": None, "energy_j": None}
    ws = [w for _, w in pts]
    energy = math.fsum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(pts))
    return {
        "samples": len(pts),
        "mean_w": round(math.fsum(ws) / len(ws), 1),
        "max_w": max(ws),  # a reading as nvidia-smi gave it
        "energy_j": round(energy, 1) if len(pts) > 1 else None,
    }


@dataclass
class Power:
    """The power samples of one step's timed processes."""

    bundle: Bundle
    step: str  # the raw logs' prefix: 'decode' -> raw/power-decode-r1-base-1.log
    logs: list[str] = field(default_factory=list)
    runs: list[PowerRun] = field(default_factory=list)
    note: str = ""
    _have: bool | None = None
    _open: dict = field(default_factory=dict)  # tag -> the sampler's ExitStack and its log

    def available(self) -> bool:
        if self._have is None:
            self._have, self.note = nvidia_smi_here(self.bundle, "power", self.step, self.logs, NOT_RECORDED)
        return self._have

    def _log(self, tag: str) -> Path:
        return self.bundle.raw_log(f"power-{self.step}-{tag}")

    def enter(self, tag: str) -> None:
        if not self.available() or self.bundle.replay:
            return
        stack, log = contextlib.ExitStack(), self._log(tag)  # a fresh path (a redone step keeps the old log)
        stack.enter_context(proc.sampling(["nvidia-smi", *nvidia_smi.POWER_ARGS], log=log))
        self._open[tag] = (stack, log)

    def exit(self, tag: str, r: int, label: str, tokens: int | None = None) -> None:
        if not self.available():
            return
        stack, log = self._open.pop(tag, (None, None))
        if stack is not None:
            stack.close()
        log = log or self._log(tag)  # a replay: the log the step recorded
        if not log.is_file():
            return  # an old run replayed, or the sampler did not start
        self.logs.append(self.bundle.rel(log))
        try:
            samples = nvidia_smi.parse_power_csv(completed_from_log(log).stdout, str(log))
        except (ParseError, ValueError):
            samples = []
        got = reading(samples)
        run = PowerRun(round=r, label=label, log=self.bundle.rel(log), **got)
        if tokens:
            run.tokens = tokens
            run.j_per_token = round(got["energy_j"] / tokens, 4) if got["energy_j"] is not None else None
        self.runs.append(run)

    def data(self) -> dict[str, Any] | None:
        if not self.runs and not self.note:
            return None  # a CPU run: the hook does not apply
        return PowerData(runs=self.runs, note=self.note).to_dict()


def summary(d: dict[str, Any] | None) -> str:
    """One line for the report: mean and max W per binary, and joules per token where tokens were counted."""
    if not d:
        return ""
    p = PowerData.from_dict(d, "power")
    if p.note and not p.runs:
        return p.note + "."
    by: dict[str, list[PowerRun]] = {}
    for run in p.runs:
        if run.mean_w is not None:
            by.setdefault(run.label, []).append(run)
    if not by:
        return "GPU power: no power.draw reading (nvidia-smi said N/A)."
    parts = []
    for label, runs in by.items():
        mean = math.fsum(x.mean_w for x in runs) / len(runs)
        txt = f"{label} mean {mean:.0f} W, max {max(x.max_w for x in runs):.0f} W"
        jt = [x.j_per_token for x in runs if x.j_per_token]
        if jt:
            txt += f", {math.fsum(jt) / len(jt):.3g} J/token"
        parts.append(txt)
    n = sum(len(v) for v in by.values())
    return (
        f"GPU power during {n} timed runs (nvidia-smi power.draw every 100 ms; J/token: the whole process's "
        f"energy, model load included, over its tokens): " + "; ".join(parts) + "."
    )
