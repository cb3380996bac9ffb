"""Timing the valid points against the starting row: the full grid, or successive halving.

The GPU part is a callable (patchkit.sweep.gpu.Gpu: link the point, run its correctness subset,
then interleaved test-backend-ops perf rounds; a test may inject its own):

    measure(points: list[Point], rounds: int) -> dict[str, Timing]

It gets the reference (the starting row) first and the points to time, runs `rounds` interleaved
rounds of the spec's cases over all of them plus a second copy of the reference (the A/A pair),
and returns a Timing for every point's name and for '<reference>#2'. A point whose correctness run
fails comes back with ok=False and the reason.

Each rung (one measure call) is stored in every member's record under its id (rounds + the members'
keys), so a rerun skips a rung that finished and re-times one whose members changed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from patchkit.measure import stats
from patchkit.sweep.points import Plan, Point
from patchkit.sweep.spec import Strategy
from patchkit.sweep.store import Store

AA = "#2"  # the suffix of the reference's A/A copy in a measure result


@dataclass(frozen=True, kw_only=True)
class Timing:
    ok: bool = True
    error: str = ""  # why the point is invalid (correctness failed, crashed, ...)
    samples: dict[str, list[float]] = field(default_factory=dict)  # case -> time (us) per round
    logs: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["logs"] = list(self.logs)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Timing:
        return cls(
            ok=bool(d.get("ok", True)),
            error=str(d.get("error", "")),
            samples={k: [float(x) for x in v] for k, v in (d.get("samples") or {}).items()},
            logs=tuple(d.get("logs") or ()),
        )


Measure = Callable[[list[Point], int], dict[str, Timing]]


@dataclass(frozen=True, kw_only=True)
class Compared:
    """One point against the reference in one rung."""

    cases: dict[str, dict]  # case -> {median_us, ref_median_us, ratio, ci_low, ci_high, verdict}
    ratio: stats.Ratio  # of the objective (per round: the objective over the cases)
    floor: float  # the A/A noise floor of the objective
    verdict: str


def _aggregate(values: list[float], objective: str) -> float:
    if objective == "max":
        return max(values)
    if objective == "mean":
        return math.fsum(values) / len(values)
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def per_round(samples: dict[str, list[float]], cases: list[str], objective: str) -> list[float]:
    """The objective of each round over `cases` (rounds aligned by index)."""
    n = min(len(samples[c]) for c in cases)
    return [_aggregate([samples[c][i] for c in cases], objective) for i in range(n)]


def compare(ref: Timing, aa: Timing | None, t: Timing, objective: str) -> Compared | None:
    """A point's times against the reference's from the same interleaved rung; None when they
    share no case."""
    import numpy as np

    cases = sorted(c for c in t.samples if t.samples[c] and ref.samples.get(c))
    if not cases:
        return None
    aa_cases = [c for c in cases if aa is not None and aa.samples.get(c)]
    floor = 0.0
    if aa is not None and aa_cases:
        aa_obj = stats.ratio(per_round(ref.samples, aa_cases, objective), per_round(aa.samples, aa_cases, objective))
        per_case = [stats.ratio(ref.samples[c], aa.samples[c]).ratio for c in aa_cases]
        floor = stats.noise_floor([aa_obj.ratio, *per_case])
    out = {}
    for c in cases:
        r = stats.ratio(ref.samples[c], t.samples[c])
        out[c] = {
            "median_us": float(np.median(t.samples[c])),
            "ref_median_us": float(np.median(ref.samples[c])),
            **r.to_dict(),
            "verdict": stats.verdict(r, floor),
        }
    r = stats.ratio(per_round(ref.samples, cases, objective), per_round(t.samples, cases, objective))
    return Compared(cases=out, ratio=r, floor=floor, verdict=stats.verdict(r, floor))


def rung_id(rounds: int, members: list[Point]) -> str:
    h = hashlib.sha256("\0".join(p.key for p in members).encode()).hexdigest()
    return f"r{rounds}-{h[:12]}"


def _rung(plan: Plan, store: Store, members: list[Point], rounds: int, measure: Measure) -> dict[str, Timing]:
    """Time `members` (the reference first) once with `rounds` rounds, or read the stored rung."""
    rid = rung_id(rounds, members)
    recs = {p.name: store.record(p) for p in members}
    ref = members[0]
    stored = [recs[p.name].get("timing", {}).get(rid) for p in members]
    if all(s is not None for s in stored) and "aa" in (stored[0] or {}):
        print(f"rung {rid}: timed earlier ({len(members)} points, {rounds} rounds)")
        out = {p.name: Timing.from_dict(s) for p, s in zip(members, stored)}  # type: ignore[arg-type]
        out[ref.name + AA] = Timing.from_dict(stored[0]["aa"])  # type: ignore[index]
        return out
    print(f"rung {rid}: timing {len(members)} points, {rounds} rounds")
    got = measure(list(members), rounds)
    out = {}
    for p in members:
        t = got.get(p.name) or Timing(ok=False, error="not measured (the measure callable returned no result)")
        out[p.name] = t
        entry = {"rounds": rounds, **t.to_dict()}
        if p is ref:
            aa = got.get(ref.name + AA) or Timing(ok=False, error="no A/A copy of the reference")
            out[ref.name + AA] = aa
            entry["aa"] = aa.to_dict()
        recs[p.name].setdefault("timing", {})[rid] = entry
        store.save(recs[p.name])
    return out


def _rank(results: dict[str, Timing], members: list[Point], objective: str) -> list[tuple[float, Point]]:
    ref = results[members[0].name]
    aa = results.get(members[0].name + AA)
    ranked = []
    for p in members[1:]:
        t = results[p.name]
        c = compare(ref, aa, t, objective) if t.ok and ref.ok else None
        if c is not None:
            ranked.append((c.ratio.ratio, p))
    return sorted(ranked, key=lambda x: (x[0], x[1].name))


def search(plan: Plan, store: Store, valid: list[Point], measure: Measure, strategy: Strategy) -> list[str]:
    """Time the valid points (the reference always among them); the ids of the rungs run, in order.
    Grid: one rung over all. Halving: every valid point with the first rung's rounds, then the best
    1/eta of them with the next rung's, ... until one is left or the rungs are spent."""
    ref = plan.reference
    alive = [p for p in valid if not p.reference]
    rungs = []
    schedule = strategy.rounds if strategy.kind == "halving" else strategy.rounds[:1]
    for i, rounds in enumerate(schedule):
        members = [ref, *alive]
        results = _rung(plan, store, members, rounds, measure)
        rungs.append(rung_id(rounds, members))
        ranked = _rank(results, members, plan.spec.objective)
        if i + 1 == len(schedule) or len(ranked) <= 1:
            break
        keep = max(1, math.ceil(len(ranked) / strategy.eta))
        alive = [p for _, p in ranked[:keep]]
    return rungs
