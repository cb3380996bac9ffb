"""`--changed` on a rows-only edit: measure again only the decode cells and numerics that read a changed row.

The FA MMA config rows are read on the host only through ggml_cuda_fattn_mma_get_config (patchkit.measure.
config_trace), so a llama.cpp process none of whose reads hits a changed row computes what it computed before the
edit. Where a `--changed` run's scope is rows-only for every changed variant v (patchkit.run.scope: the rows, old
and new), the earlier run of this work folder that measured v at the head of its last build (`since`) with a
config-read trace (patches/local/0011) says which cells of v read which rows: a decode cell whose reads for v hit
no changed row is not measured again (for any arm), and v's numerics is not run again when none of its processes
read one. Anything missing (no earlier run, no trace, a non-rows change, another matrix) measures everything as
before, and says why in one line. The cells not measured again stand in the earlier run (named): nothing of it is
copied into this run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import ResultsError
from patchkit.measure import config_trace
from patchkit.measure.decode_args import DEPTH, UBATCH, cut_to, with_values
from patchkit.results import read_results
from patchkit.run.scope import Scope

DECODE = "bench:decode"
NUMERICS = "numerics"


@dataclass(frozen=True)
class DecodePlan:
    """Which decode cells this run measures: `skip` (identities) are not measured again, they stand in `runs`;
    `first`: round 1's llama-bench arguments per process (None: the process has no cell to run), or None (all)."""

    skip: frozenset = frozenset()
    first: tuple | None = None
    runs: tuple[str, ...] = ()
    carried: tuple = ()  # the earlier reads of the cells left out ({variant, ident, process, keys, carried_from})
    why: str = (
        ""  # one line: what was left out and where it stands, or why every cell is measured ('' without --changed)
    )

    def to_dict(self) -> dict:
        return {
            "why": self.why,
            "runs": list(self.runs),
            "cells": [list(k) for k in sorted(self.skip, key=repr)],
            "first_argvs": None if self.first is None else [None if a is None else list(a) for a in self.first],
            "carried": [dict(r) for r in self.carried],
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> DecodePlan:
        if not d:
            return cls()
        first = d.get("first_argvs")
        return cls(
            skip=frozenset(tuple(k) for k in d.get("cells") or ()),
            first=None if first is None else tuple(None if a is None else tuple(a) for a in first),
            runs=tuple(d.get("runs") or ()),
            why=str(d.get("why") or ""),
            carried=tuple(d.get("carried") or ()),
        )


@dataclass(frozen=True)
class Earlier:
    run_id: str
    data: dict = field(repr=False)  # the step's data


def _runs(runs_dir: Path, here: Path | None) -> Iterator[tuple[str, dict]]:
    """The runs of the work folder, newest first (results.json `created`), without this run's own folder."""
    found = []
    for p in runs_dir.glob("*") if runs_dir.is_dir() else ():
        if here is not None and p.resolve() == here.resolve():
            continue
        try:
            data = read_results(p / "results.json")
        except (ResultsError, OSError):
            continue
        found.append((str(data.get("created") or ""), p.name, data))
    for _, name, data in sorted(found, key=lambda x: (x[0], x[1]), reverse=True):
        yield name, data


def earlier(runs_dir: Path, here: Path | None, step: str, variant: str, head: str, *, want) -> Earlier | None:
    """The newest earlier run whose results measured `variant` at `head` in `step` with traces `want(data)` accepts."""
    for name, data in _runs(runs_dir, here):
        heads = {v.get("name"): v.get("head") for v in data.get("variants") or () if isinstance(v, dict)}
        st = (data.get("steps") or {}).get(step) or {}
        sd = st.get("data") or {}
        ok = st.get("status") in ("ok", "not_run")  # not run: --changed left it all out (its reads carried)
        if heads.get(variant) == head and ok and sd.get("config_reads") and want(sd):
            return Earlier(name, sd)
    return None


def _rows_only(scope: Scope) -> str:
    """'' when every changed variant's change is rows-only, else why not (one line)."""
    if not scope.changed:
        return "no variant changed"
    for v, c in scope.changed.items():
        if not c.get("rows"):
            return f"{v}: {c.get('why') or 'not a rows-only change'}"
    return ""


def decode_plan(
    scope: Scope | None,
    tracing: config_trace.Tracing,
    runs_dir: Path,
    here: Path | None,
    every: Sequence[Sequence[str]],
) -> DecodePlan:
    """The decode cells of a `--changed` run (every: llama-bench's arguments of each process of a round)."""
    if scope is None:
        return DecodePlan()
    every = [[str(a) for a in argv] for argv in every]
    no = "--changed: every decode cell measured: "
    if not tracing.on:
        return DecodePlan(why=no + tracing.why)
    if why := _rows_only(scope):
        return DecodePlan(why=no + why)
    skip: set | None = None
    groups: dict[tuple, int] = {}
    found: list[Earlier] = []
    unknown = 0  # cells whose earlier processes show no `trace: on` line
    for v, c in scope.changed.items():
        e = earlier(runs_dir, here, DECODE, v, str(c.get("since") or ""), want=lambda sd: _argvs(sd) == every)
        if e is None:
            since = str(c.get("since") or "")[:12]
            return DecodePlan(
                why=no + f"no earlier run in this work folder measured {v} at {since} with a config-read trace "
                "and this matrix"
            )
        mine = [r for r in e.data["config_reads"] if r.get("variant") == v]
        quiet = {tuple(r["ident"]) for r in mine if _quiet(r, c["rows"])}
        unknown += sum(1 for r in mine if not _traced(r))
        skip = quiet if skip is None else skip & quiet
        groups.update({tuple(r["ident"]): int(r.get("process", 0)) for r in mine})
        found.append(e)
    skip = skip or set()
    if not skip:
        runs = ", ".join(dict.fromkeys(e.run_id for e in found))
        why = f"{unknown} show no 'trace: on' line (reads unknown), the others read" if unknown else "each reads"
        return DecodePlan(why=f"--changed: every decode cell measured: {why} a changed row (earlier run {runs})")
    carried = _carried(found, skip)
    runs = tuple(sorted({r["carried_from"] for r in carried.values()}))
    first = tuple(_cut(argv, i, groups, skip) for i, argv in enumerate(every))
    left = sum(1 for k in groups if k not in skip)
    why = (
        f"--changed: {len(skip)} decode cells read no changed row and are not measured again (they stand in "
        f"{', '.join(runs)}); {left} measured" + (f" ({unknown} of them show no 'trace: on' line)" if unknown else "")
    )
    return DecodePlan(skip=frozenset(skip), first=first, runs=runs, why=why, carried=tuple(carried.values()))


def _traced(r: dict) -> bool:
    """A cell's (or process's) earlier processes showed the `trace: on` line (absent: recorded before it existed)."""
    return r.get("traced") is True


def _quiet(r: dict, rows: Sequence[dict]) -> bool:
    """A cell's (or process's) earlier reads show the trace on and hit none of `rows`."""
    return _traced(r) and not config_trace.hits(r.get("keys") or [], rows)


def _carried(found: list[Earlier], skip: set) -> dict[tuple, dict]:
    """The earlier reads of the cells left out, each arm's, with the run where the cell's numbers stand: a cell
    that read no changed row reads what it read before (the premise), so the next edit's run can leave it out
    again (a cell an earlier run itself left out keeps the run it was carried from)."""
    out: dict[tuple, dict] = {}
    for e in found:
        for r in e.data["config_reads"]:
            k = tuple(r["ident"])
            if k in skip:
                out.setdefault((r.get("variant"), k), {**r, "carried_from": r.get("carried_from") or e.run_id})
    return out


def _argvs(sd: dict) -> list[list[str]]:
    real = (sd.get("real") or {}).get("argv")
    return [[str(a) for a in argv] for argv in [*(sd.get("argvs") or []), *([real] if real else [])]]


def _cut(argv: list[str], i: int, groups: dict[tuple, int], skip: set) -> tuple[str, ...] | None:
    """Process i's round-1 arguments: -d and -ub cut to its cells still to measure, as bench:decode cuts a later
    round's; None: none left. A process the earlier run recorded no cell of runs whole."""
    mine = [k for k, g in groups.items() if g == i]
    if not mine:
        return tuple(argv)
    open_ = [k for k in mine if k not in skip]
    if not open_:
        return None
    out = cut_to(argv, open_)  # as bench:decode cuts a later round's
    ubs = sorted({k[UBATCH] for k in open_}, reverse=True)
    top = max((int(x) for x in argv[argv.index("-ub") + 1].split(",")), default=0) if "-ub" in argv[:-1] else 0
    if top and any(k[DEPTH] for k in open_) and top not in ubs:
        # a depth is prefilled at the first test's micro-batch: the largest, as in round 1 (its cells' records are
        # left out as the others' are): not 32768 single-token steps at -ub 1
        out = with_values(out, "-ub", [top, *ubs])
    return tuple(out)


@dataclass(frozen=True)
class NumericsPlan:
    """The variants whose numerics is not run again (variant -> the run where it stands), the line saying so or why
    all run, and the left-out variants' earlier reads (carried_from: that run), kept for the next edit's run."""

    left: dict = field(default_factory=dict)
    why: str = ""
    carried: tuple = ()

    def data(self) -> dict:
        return {"rows_scope": self.why, **({"config_reads": list(self.carried)} if self.carried else {})}


def numerics_plan(
    scope: Scope | None, tracing: config_trace.Tracing, runs_dir: Path, here: Path | None
) -> NumericsPlan:
    """numerics in a `--changed` run: a changed variant none of whose processes read a changed row in the earlier
    run that ran its numerics at the head of its last build is not run again."""
    if scope is None:
        return NumericsPlan()
    no = "--changed: numerics of every changed variant run: "
    if not tracing.on:
        return NumericsPlan(why=no + tracing.why)
    if why := _rows_only(scope):
        return NumericsPlan(why=no + why)
    out: dict[str, str] = {}
    notes, carried = [], []
    for v, c in scope.changed.items():
        e = earlier(runs_dir, here, NUMERICS, v, str(c.get("since") or ""), want=lambda sd, v=v: _has(sd, v))
        if e is None:
            notes.append(f"{v}: no earlier run with a config-read trace of its numerics")
            continue
        mine = [r for r in e.data["config_reads"] if r.get("variant") == v]
        if config_trace.hits([k for r in mine for k in r.get("keys") or []], c["rows"]):
            notes.append(f"{v}: its processes read a changed row")
            continue
        if not all(_traced(r) for r in mine):
            notes.append(f"{v}: a process of {e.run_id} shows no 'trace: on' line, so its reads are unknown")
            continue
        out[v] = next((r["carried_from"] for r in mine if r.get("carried_from")), e.run_id)
        carried += [{**r, "carried_from": out[v]} for r in mine]
        notes.append(f"{v}: no process read a changed row, not run again (stands in {out[v]})")
    return NumericsPlan(left=out, why="--changed: numerics: " + "; ".join(notes), carried=tuple(carried))


def _has(sd: dict, variant: str) -> bool:
    return any(r.get("variant") == variant for r in sd.get("config_reads") or ())


def of_step(built, tracing: config_trace.Tracing, every: Sequence[Sequence[str]]) -> DecodePlan:
    """bench:decode's plan in a run (patchkit.measure.tool.Built), its line printed."""
    runs_dir = built.ctx.ws.runs(built.ctx.recipe.name)
    plan = decode_plan(built.scope, tracing, runs_dir, built.bundle.path, every)
    if plan.why:
        print(f"[bench:decode] {plan.why}")
    return plan


def numerics_of_step(built, tracing: config_trace.Tracing, name: str) -> NumericsPlan:
    """numerics' plan in a run (patchkit.measure.tool.Built), its line printed."""
    plan = numerics_plan(built.scope, tracing, built.ctx.ws.runs(built.ctx.recipe.name), built.bundle.path)
    if plan.why:
        print(f"[{name}] {plan.why}")
    return plan
