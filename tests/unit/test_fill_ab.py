"""scripts/fill_ab.py and perf_budget.py's phases on a real recording (tests/fixtures/fill-ab, CPU backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import script as _script

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "fill-ab"


def test_every_process_says_where_its_seconds_went():
    budget = _script("perf_budget")
    logs = sorted(p for p in (FIX / "raw").glob("perf-r*-*.log") if not p.name.endswith(".stderr.log"))
    assert len(logs) == 8
    for log in logs:
        proc = budget.read_process(log)
        # the f16 kv=4096 case is in the perf list twice (patches/local/0001): 5 records, 5 phase lines
        assert len(proc.phases) == len(proc.cases) == 5, log
        sums = budget.phase_sums(proc)
        assert sums["timed"] == pytest.approx(proc.timed_s, rel=1e-3)  # the phases' timed time is the sql's
        assert sums["init"] > 0 and sums["end"] > -0.06, (log, sums)  # and they fit in the process's wall time


def test_the_fast_fill_is_compared_case_by_case_with_the_upstream_fill():
    fill_ab = _script("fill_ab")
    procs = fill_ab.read(FIX)
    assert [len(procs[m]) for m in fill_ab.MODES] == [4, 4]
    out = fill_ab.render(procs)
    rows = [ln for ln in out.splitlines() if ln.startswith("| kv=")]
    assert len(rows) == 4  # 4 distinct cases, each with its ratio and interval
    for row in rows:
        ratio, lo, hi = (
            float(x) for x in row.split("|")[4].replace("[", " ").replace("]", " ").replace(",", " ").split()[:3]
        )
        assert lo <= ratio <= hi
    init = {m: sum(sum(x["init"] for x in p.phases) for p in procs[m]) for m in fill_ab.MODES}
    assert init["fast"] < init["upstream"]  # recorded: 5.9 s against 11.8 s of initialize_tensors
    assert fill_ab.main([str(FIX / "raw")]) == 2  # a folder without the logs: one line, exit 2
