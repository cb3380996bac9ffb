#!/usr/bin/env python3
"""Where the time of `bench:kernel` goes: per test-backend-ops process of a run folder, its wall time
(the raw log's `# exit: N, S s`), the timed time of its cases (avg_time_us * n_runs of each sql record:
test-backend-ops' own total_time_us), and the remainder (process start with device init, and per case
tensor allocation, `initialize_tensors`, graph build and the warmup run).

Per case size, the time between a case's test_time and the previous case's (1 s resolution, averaged
over every process) minus its timed time estimates its set-up. The first case of a process has no
previous one: its set-up is counted with the process start.

Where the processes ran with GGML_TEST_PERF_PHASES=1 (patches/local/0006; patchkit's kernel timing sets it),
their stderr logs hold each case's phases in microseconds, and a second part says exactly where the process
seconds went: device init (process start to the first case), between cases (freeing, skipped cases' graphs),
allocation, initialize_tensors (the fill), the warmup compute, the rest of the set-up, the timed time, the
timed loop's untimed rest, and the process's end (wall time after the last case).

    python3 scripts/perf_budget.py examples/h200            # raw/perf-r*-*.log
    python3 scripts/perf_budget.py RUN --markdown
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from patchkit import parsers
from patchkit.errors import ParseError


@dataclass(frozen=True)
class Case:
    params: str
    timed_s: float  # avg_time_us * n_runs
    n_runs: int
    at: datetime | None  # test_time: when the case finished (1 s resolution)


@dataclass(frozen=True)
class Process:
    log: str
    wall_s: float
    cases: tuple[Case, ...]
    phases: tuple[dict[str, int], ...] = ()  # the stderr log's "perf-phases:" lines (microseconds), in order

    @property
    def timed_s(self) -> float:
        return sum(c.timed_s for c in self.cases)


def _at(value: object) -> datetime | None:
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def read_process(log: Path) -> Process:
    raw = parsers.read_raw_log(log)
    recs = parsers.parse_perf_sql(raw.output, str(log))
    cases = tuple(
        Case(params=r.op_params, timed_s=r.time_us * r.n_runs / 1e6, n_runs=r.n_runs, at=_at(r.extra.get("test_time")))
        for r in recs
        if r.supported is not False
    )
    return Process(log=log.name, wall_s=raw.seconds, cases=cases, phases=read_phases(log))


PHASE_RE = re.compile(r"^perf-phases: ((?:\w+=-?\d+ )+)case=", re.M)


def read_phases(log: Path) -> tuple[dict[str, int], ...]:
    """The "perf-phases:" lines of a process's stderr log (perf-r1-base.stderr.log), each as {name: us}."""
    err = log.with_name(log.name.removesuffix(".log") + ".stderr.log")
    if not err.is_file():
        return ()
    text = err.read_text(errors="replace")
    return tuple({k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())} for m in PHASE_RE.finditer(text))


PHASES = (
    ("device init (process start to the first case)", "start"),
    ("between cases (freeing, skipped cases' graphs)", "between"),
    ("allocation", "alloc"),
    ("initialize_tensors (fill)", "init"),
    ("warmup compute", "warmup"),
    ("rest of the set-up (graph, runs)", "other"),
    ("timed", "timed"),
    ("timed loop, untimed rest", "loop_rest"),
    ("process end (after the last case)", "end"),
)


def phase_sums(p: Process) -> dict[str, float]:
    """Seconds of each of PHASES in one process (its phase lines and its wall time)."""
    ph = p.phases
    out = dict.fromkeys((k for _, k in PHASES), 0.0)
    out["start"] = ph[0]["gap"] / 1e6
    out["between"] = sum(x["gap"] for x in ph[1:]) / 1e6
    for x in ph:
        out["alloc"] += x["alloc"] / 1e6
        out["init"] += x["init"] / 1e6
        out["warmup"] += x["warmup"] / 1e6
        out["other"] += (x["total"] - x["alloc"] - x["init"] - x["warmup"] - x["loop"]) / 1e6
        out["timed"] += x["timed"] / 1e6
        out["loop_rest"] += (x["loop"] - x["timed"]) / 1e6
    out["end"] = p.wall_s - sum(x["gap"] + x["total"] for x in ph) / 1e6
    return out


def render_phases(procs: list[Process], md: bool) -> str:
    """Where the processes' seconds went, from their phase lines (only processes that have them)."""
    withp = [p for p in procs if p.phases]
    if not withp:
        return ""
    sums = dict.fromkeys((k for _, k in PHASES), 0.0)
    for p in withp:
        for k, v in phase_sums(p).items():
            sums[k] += v
    wall = sum(p.wall_s for p in withp)
    rows = [[what, f"{sums[k]:.1f}", f"{100 * sums[k] / wall:.0f} %"] for what, k in PHASES]
    rows.append([f"all ({len(withp)} processes)", f"{wall:.1f}", "100 %"])
    inits: dict[str, list[float]] = defaultdict(list)
    for p in withp:
        for x, c in zip(p.phases, p.cases):
            inits[size_of(c.params)].append(x["init"] / 1e6)
    sizes = [
        [k, str(len(v)), f"{sum(v) / len(v):.2f}", f"{max(v):.2f}"]
        for k, v in sorted(inits.items(), key=lambda kv: _size_key(kv[0]))
    ]
    return "\n".join(
        [
            "phases (GGML_TEST_PERF_PHASES):",
            *_table(["where", "s", "of wall"], rows, md),
            "",
            *_table(["case size", "count", "init s (mean)", "init s (max)"], sizes, md),
        ]
    )


def size_of(params: str) -> str:
    """The case's size: 'kv=122880,nb=1,q4_0'."""
    kv = re.search(r"\bkv=(\d+)", params)
    nb = re.search(r"\bnb=(\d+)", params)
    tk = re.search(r"\btype_K=(\w+)", params)
    return ",".join(m.group(0) if i < 2 else m.group(1) for i, m in enumerate((kv, nb, tk)) if m) or params[:40]


def per_size(procs: list[Process]) -> dict[str, list[tuple[float, float]]]:
    """size -> [(timed s, set-up s)] of every case that has a previous case in its process."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for p in procs:
        for prev, c in zip(p.cases, p.cases[1:]):
            if prev.at is None or c.at is None:
                continue
            out[size_of(c.params)].append((c.timed_s, (c.at - prev.at).total_seconds() - c.timed_s))
    return out


def _table(header: list[str], rows: list[list[str]], md: bool) -> list[str]:
    if md:
        return ["| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *rows]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header, *rows]]


def render(procs: list[Process], md: bool) -> str:
    rows = [
        [
            p.log.removesuffix(".log"),
            f"{p.wall_s:.1f}",
            f"{p.timed_s:.1f}",
            f"{p.wall_s - p.timed_s:.1f}",
            str(len(p.cases)),
        ]
        for p in procs
    ]
    wall, timed, gaps = sum(p.wall_s for p in procs), sum(p.timed_s for p in procs), sum(_gaps(p) for p in procs)
    n_cases = sum(len(p.cases) for p in procs)
    rows.append(["all", f"{wall:.1f}", f"{timed:.1f}", f"{wall - timed:.1f}", str(n_cases)])
    lines = _table(["process", "wall s", "timed s", "rest s", "cases"], rows, md)
    sizes = []
    for size, xs in sorted(per_size(procs).items(), key=lambda kv: _size_key(kv[0])):
        t, u = sum(x for x, _ in xs) / len(xs), sum(y for _, y in xs) / len(xs)
        sizes.append([size, str(len(xs)), f"{t:.2f}", f"{u:.2f}"])
    lines += ["", *_table(["case size", "count", "timed s", "set-up s"], sizes, md), ""]
    start = wall - timed - gaps
    for what, sec in (("timed (min time)", timed), ("case set-up", gaps), ("process start + first set-up", start)):
        lines.append(f"{what}: {sec:.1f} s ({100 * sec / wall:.0f} %)" + ("  " if md else ""))
    lines.append(f"processes: {len(procs)}, case runs: {n_cases}, wall: {wall:.1f} s")
    return "\n".join(lines)


def _gaps(p: Process) -> float:
    """Set-up time of every case but the first (from the test_time steps)."""
    return sum(
        (c.at - prev.at).total_seconds() - c.timed_s
        for prev, c in zip(p.cases, p.cases[1:])
        if prev.at is not None and c.at is not None
    )


def _size_key(size: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.findall(r"\d+|\D+", size))


def _log_key(log: Path) -> tuple:
    """perf-r<round>-<label>[.<attempt>].log in round order, then by label."""
    m = re.match(r"perf-r(\d+)-(.+?)\.log$", log.name)
    return (int(m.group(1)), m.group(2)) if m else (0, log.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run folder (its raw/perf-r*-*.log)")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    a = ap.parse_args(argv)
    found = (a.run / "raw").glob("perf-r*-*.log")
    logs = sorted((p for p in found if not p.name.endswith(".stderr.log")), key=_log_key)  # stderr: proc.stderr_log
    if not logs:
        print(f"{a.run}: no raw/perf-r*-*.log", file=sys.stderr)
        return 2
    try:
        procs = [read_process(log) for log in logs]
    except ParseError as e:
        print(e, file=sys.stderr)
        return 2
    print(render(procs, a.markdown))
    phases = render_phases(procs, a.markdown)
    if phases:
        print("\n" + phases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
