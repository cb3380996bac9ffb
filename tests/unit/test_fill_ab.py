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


CHUNKS = ROOT / "tests" / "fixtures" / "fill-chunks"


def test_the_chunked_fill_leaves_the_timed_part_and_cuts_init():
    """patches/local/0008 against 0007 (two builds, both GGML_TEST_PERF_FILL=fast), 4 alternating rounds."""
    fill_ab = _script("fill_ab")
    modes = ("fast", "chunks")
    procs = fill_ab.read(CHUNKS, modes)
    assert [len(procs[m]) for m in modes] == [4, 4]
    rows = [ln for ln in fill_ab.render(procs).splitlines() if ln.startswith("| kv=")]
    assert len(rows) == 2  # kv=122880 nb=1, q4_0 and f16
    for row in rows:
        ratio, lo, hi = (
            float(x) for x in row.split("|")[4].replace("[", " ").replace("]", " ").replace(",", " ").split()[:3]
        )
        assert lo <= 1.0 <= hi and lo <= ratio <= hi, row  # recorded: 0.971 [0.942, 1.025], 0.980 [0.925, 1.039]
    init = {m: sum(sum(x["init"] for x in p.phases) for p in procs[m]) for m in modes}
    assert init["chunks"] < 0.7 * init["fast"]  # recorded: 10.5 s against 19.2 s of initialize_tensors
    # 0008's "perf-init:" lines split init; their parts fit in it, and perf_budget still reads the phase lines
    budget = _script("perf_budget")
    for log in sorted((CHUNKS / "raw").glob("perf-r*-chunks.stderr.log")):
        text = log.read_text()
        parts = [
            dict(kv.split("=") for kv in ln.split()[1:4]) for ln in text.splitlines() if ln.startswith("perf-init:")
        ]
        phases = budget.read_phases(log.with_name(log.name.replace(".stderr", "")))
        assert len(parts) == len(phases) == 2, log
        for part, ph in zip(parts, phases):
            assert 0 < sum(int(v) for v in part.values()) <= ph["init"], (log, part, ph)
    assert fill_ab.main(["--modes", "fast", str(CHUNKS)]) == 2  # one name: one line, exit 2
