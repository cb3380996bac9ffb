"""The GPU's SM clock, temperature and clock-event reasons around each timed round (issue 27).

Each sample is one `nvidia-smi` run logged like any tool run (raw/clocks-...log), so a replay reads the
same samples and every number in the report traces to a raw log. A round is flagged `throttled` when a
sample before or after it has a slowdown reason active (power cap, HW slowdown, thermal, power brake;
patchkit.parsers.nvidia_smi.SLOWDOWN). Flagged, not re-run: the round's samples stay in the statistics
and the report names the round (NVBench discards such samples; a re-run would cost another round of
every binary). On a machine without nvidia-smi nothing is recorded and that is said once.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from patchkit import backends
from patchkit.errors import ParseError
from patchkit.measure.tool import run_logged
from patchkit.parsers import nvidia_smi
from patchkit.results import Bundle

NOT_RECORDED = "GPU clocks not recorded: no nvidia-smi on this machine"


@dataclass
class Clocks:
    """The clock samples of one step's rounds."""

    bundle: Bundle
    step: str  # the raw logs' prefix: 'decode' -> raw/clocks-decode-r1-base-before.log
    logs: list[str] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)  # round, label, before, after, throttled
    note: str = ""
    _have: bool | None = None
    _before: dict = field(default_factory=dict)  # tag -> the sample before its process

    # the hook (patchkit.measure.hooks): a sample before and after each timed process
    def enter(self, tag: str) -> None:
        self._before[tag] = self.sample(f"{tag}-before")

    def exit(self, tag: str, r: int, label: str, tokens: int | None = None) -> None:
        self.around(r, label, self._before.pop(tag, None), self.sample(f"{tag}-after"))

    def available(self) -> bool:
        """Whether nvidia-smi is there; when it is not, a raw log says so (a replay reads the same note)."""
        if self._have is None:
            self._have, self.note = nvidia_smi_here(self.bundle, "clocks", self.step, self.logs, NOT_RECORDED)
        return self._have

    def sample(self, name: str) -> dict | None:
        """One sample of GPU 0 (nvidia-smi's first line), or None (not recorded, or not in a replay)."""
        if not self.available():
            return None
        done, why, log = run_logged(
            self.bundle, f"clocks-{self.step}-{name}", ["nvidia-smi", *nvidia_smi.CLOCK_ARGS], timeout=60
        )
        if why or done is None:
            return None  # an old run replayed (no such log), or nvidia-smi failed: the round is not flagged
        self.logs.append(self.bundle.rel(log))
        try:
            return nvidia_smi.parse_clocks_csv(done.stdout, str(log))[0].to_dict()
        except ParseError:
            return None

    def around(self, r: int, label: str, before: dict | None, after: dict | None) -> None:
        if before is None and after is None:
            return
        slow = sorted({n for s in (before, after) if s for n in _slowdowns(s)})
        self.rounds.append({"round": r, "label": label, "before": before, "after": after, "throttled": slow})

    def data(self) -> dict | None:
        """The samples and the note; None when there is neither (a CPU run: nothing to say)."""
        return {"samples": self.rounds, "note": self.note} if self.rounds or self.note else None


def nvidia_smi_here(bundle: Bundle, hook: str, step: str, logs: list[str], not_recorded: str) -> tuple[bool, str]:
    """Whether a GPU hook can sample: (yes, '') on a GPU run with nvidia-smi; (no, '') on a CPU run (no GPU:
    nothing to say); (no, not_recorded) without nvidia-smi, said by a raw log `<hook>-<step>-missing` that a
    replay reads back."""
    if not backends.device_needs_gpu(bundle.data.get("backend")):
        return False, ""
    name = f"{hook}-{step}-missing"
    if bundle.replay:
        have = not bundle.raw_log(name).is_file()
    else:
        have = shutil.which("nvidia-smi") is not None
        if not have:  # writes '# not run: nvidia-smi not found' as the raw log
            _, _, log = run_logged(bundle, name, ["nvidia-smi", *nvidia_smi.CLOCK_ARGS], timeout=60)
            logs.append(bundle.rel(log))
    if have:
        return True, ""
    print(f"{step}: {not_recorded}", flush=True)
    return False, not_recorded


def _slowdowns(sample: dict) -> list[str]:
    bits = int(str(sample.get("reasons") or "0"), 0)
    return [n for b, n in nvidia_smi.REASONS.items() if bits & b & nvidia_smi.SLOWDOWN]


def summary(d: dict | None) -> str:
    """One line for the report: the SM clock and temperature range, and the throttled rounds."""
    if not d:
        return ""
    if d.get("note") and not d.get("samples"):
        return str(d["note"]) + "."
    ss = [s for r in d["samples"] for s in (r.get("before"), r.get("after")) if s]
    if not ss:
        return ""
    clk = [int(s["sm_mhz"]) for s in ss]
    tmp = [int(s["temp_c"]) for s in ss]
    top = max(int(s["max_sm_mhz"]) for s in ss)
    hot = [r for r in d["samples"] if r.get("throttled")]
    flagged = "; ".join(f"round {r['round']} {r['label']}: {', '.join(r['throttled'])}" for r in hot)
    return (
        f"GPU clocks around {len(d['samples'])} timed runs (nvidia-smi before and after each): SM {min(clk)}-"
        f"{max(clk)} MHz of {top} max, {min(tmp)}-{max(tmp)} C; "
        + (f"throttled (flagged, kept): {flagged}." if hot else "no run throttled.")
    )
