#!/usr/bin/env python3
"""Where the time of `bench:kernel` goes: per test-backend-ops process of a run folder, its wall time
(the raw log's `# exit: N, S s`), the timed time of its cases (avg_time_us * n_runs of each sql record:
test-backend-ops' own total_time_us), and the remainder (process start with device init, and per case
tensor allocation, `initialize_tensors`, graph build and the warmup run).

Per case size, the time between a case's test_time and the previous case's (1 s resolution, averaged
over every process) minus its timed time estimates its set-up. The first case of a process has no
previous one: its set-up is counted with the process start.

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
    return Process(log=log.name, wall_s=raw.seconds, cases=cases)


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
