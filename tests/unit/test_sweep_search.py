"""Timing over the injected measure callable (grid, successive halving), resume, and the outputs made
from the stored results. The measure here is a deterministic model of times (the real one is the
GPU pipeline the lead plugs in); the store, search and outputs are the real ones."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from patchkit.sweep import output, points, search
from patchkit.sweep.check import invalid_reason
from patchkit.sweep.search import AA, Timing
from patchkit.sweep.spec import Strategy, parse_sweep
from patchkit.sweep.store import Store, plan_json
from patchkit.workspace import write_json

ROOT = Path(__file__).resolve().parents[2]
HEADER = (ROOT / "tests" / "fixtures" / "sweep" / "fattn-mma-f16.cuh").read_text()
CASES = ("hsk=256,nb=1,kv=4096", "hsk=256,nb=1,kv=32768")


def make_plan(start_key: str = "k", **changes) -> points.Plan:
    base = {
        "name": "t",
        "file": "ggml/src/ggml-cuda/fattn-mma-f16.cuh",
        "function": "ggml_cuda_fattn_mma_get_config_ampere",
        "row": {"DKQ": 256, "DV": 256, "ncols": 8},
        "params": {"nthreads": [128, 64, 32], "nbatch_fa": [64, 32, 96]},
        "start": "+0001",
        "heatmap": ["nthreads", "nbatch_fa"],
    }
    return points.plan(parse_sweep({**base, **changes}, "s.toml: sweep"), HEADER, start_key=start_key)


def speed(row: dict) -> float:
    """Modelled time factor of a point: 64 threads and nbatch_fa 32 are faster, 32 threads slower."""
    return {128: 1.0, 64: 0.8, 32: 1.3}[row["nthreads"]] * {64: 1.0, 32: 0.9, 96: 1.02}[row["nbatch_fa"]]


class Model:
    """measure(points, rounds): every point and the A/A copy of the reference, `rounds` samples each."""

    def __init__(self, fail: tuple[str, ...] = ()):
        self.calls: list[tuple[list[str], int]] = []
        self.fail = fail

    def __call__(self, pts: list[points.Point], rounds: int) -> dict[str, Timing]:
        self.calls.append(([p.name for p in pts], rounds))
        rng = np.random.default_rng(len(self.calls))
        out = {}
        for label, p in [(p.name, p) for p in pts] + [(pts[0].name + AA, pts[0])]:
            if p.name in self.fail:
                out[label] = Timing(ok=False, error="test-backend-ops: 2/3006 tests failed")
                continue
            out[label] = Timing(
                samples={
                    c: list(100.0 * (i + 1) * speed(p.row) * (1 + 0.002 * rng.standard_normal(rounds)))
                    for i, c in enumerate(CASES)
                }
            )
        return out


def checked(store: Store, plan: points.Plan, invalid: dict[str, str]) -> list[points.Point]:
    """Stored compile checks (as patchkit.sweep.check writes them): the valid points."""
    for p in plan.points:
        store.write_patch(p)
        rec = store.record(p)
        bad = invalid.get(p.name, "")
        rec["check"]["89"] = {"arch": "89", "ok": not bad, "error": bad, "units": ["u.cu"], "toolchain": "t"}
        store.save(rec)
    return [p for p in plan.points if not invalid_reason(store.record(p))]


def save_plan(store: Store, plan: points.Plan, rungs: list[str]) -> None:
    write_json(
        store.plan_file,
        plan_json(
            plan,
            recipe="r",
            base="b",
            start={"variant": "+0001", "key": "k", "head": "h"},
            header=HEADER,
            archs=("89",),
            rungs=rungs,
        ),
    )


BAD = 'ggml/src/ggml-cuda/fattn-mma-f16.cuh:69: static assertion failed with "bad nthreads"'


def test_grid_times_every_valid_point_once_and_a_rerun_times_nothing(tmp_path):
    plan = make_plan()
    store = Store(tmp_path / "s")
    valid = checked(store, plan, {"nthreads32-nbatch_fa96": BAD})
    m = Model()
    rungs = search.search(plan, store, valid, m, Strategy(kind="grid", rounds=(5,)))
    assert len(m.calls) == 1 and m.calls[0][1] == 5
    assert m.calls[0][0][0] == plan.reference.name and "nthreads32-nbatch_fa96" not in m.calls[0][0]
    assert len(m.calls[0][0]) == len(plan.points) - 1
    again = search.search(plan, store, valid, m, Strategy(kind="grid", rounds=(5,)))
    assert again == rungs and len(m.calls) == 1  # resumed from the stored results
    # a changed input (another start variant) gives new keys: nothing stale is served
    plan2 = make_plan(start_key="k2")
    valid2 = checked(Store(tmp_path / "s"), plan2, {})
    search.search(plan2, store, valid2, m, Strategy(kind="grid", rounds=(5,)))
    assert len(m.calls) == 2


def test_halving_keeps_the_best_third(tmp_path):
    plan = make_plan()
    store = Store(tmp_path / "s")
    valid = checked(store, plan, {})
    m = Model()
    rungs = search.search(plan, store, valid, m, Strategy(kind="halving", rounds=(2, 6, 18), eta=3))
    sizes = [(len(names), r) for names, r in m.calls]
    assert sizes == [(9, 2), (4, 6), (2, 18)]  # 8 points + reference; ceil(8/3) = 3; ceil(3/3) = 1
    assert m.calls[2][0] == [plan.reference.name, "nthreads64-nbatch_fa32"]
    assert len(rungs) == 3 and len(set(rungs)) == 3


def test_outputs_from_the_stored_results(tmp_path):
    plan = make_plan()
    store = Store(tmp_path / "s")
    valid = checked(store, plan, {"nthreads32-nbatch_fa96": BAD})
    m = Model(fail=("nthreads32-nbatch_fa32",))
    rungs = search.search(plan, store, valid, m, Strategy(kind="grid", rounds=(7,)))
    save_plan(store, plan, rungs)
    files = output.write_outputs(store)
    table = Path(files["table"]).read_text()
    assert "| nthreads128-nbatch_fa64 (start) | yes |" in table
    assert f"| nthreads32-nbatch_fa96 | no: sm_89: {BAD} |" in table
    assert "| nthreads32-nbatch_fa32 | no: timing: test-backend-ops: 2/3006 tests failed |" in table
    row = next(ln for ln in table.splitlines() if ln.startswith("| nthreads64-nbatch_fa32 |"))
    assert re.search(r"\| 0\.7[12]\d \(0\.7\d\d-0\.7\d\d\) \| faster \|$", row), row
    assert "- c1: `hsk=256,nb=1,kv=32768`" in table
    section = Path(files["section"]).read_text()
    assert section.startswith("### Parameter sweep\n")
    assert "Tried 8 points besides the starting row; invalid 2 (" in section
    assert re.search(r"- Best: nthreads64-nbatch_fa32, 0\.7[12]\dx the starting row's time .*\): faster\.", section)
    assert Path(files["best"]).read_bytes() == plan.point("nthreads64-nbatch_fa32").patch
    png = Path(files["heatmap"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    output.write_outputs(store)
    assert Path(files["heatmap"]).read_bytes() == png  # the same results: the same bytes


def test_check_only_outputs_say_not_timed_and_write_no_best_patch(tmp_path):
    plan = make_plan()
    store = Store(tmp_path / "s")
    checked(store, plan, {"nthreads32-nbatch_fa96": BAD})
    save_plan(store, plan, [])
    files = output.write_outputs(store)
    assert "best" not in files and not (store.out / "best.patch").exists()
    assert "| nthreads64-nbatch_fa32 | yes | - | not timed |" in Path(files["table"]).read_text()
    section = Path(files["section"]).read_text()
    assert "invalid 1 (nthreads32-nbatch_fa96: sm_89: " in section and "- Not timed (compile checks only)." in section


def test_no_point_faster_than_the_start_writes_no_patch(tmp_path):
    plan = make_plan(params={"nthreads": [128, 32]}, heatmap=[])
    store = Store(tmp_path / "s")
    valid = checked(store, plan, {})
    rungs = search.search(plan, store, valid, Model(), Strategy(kind="grid", rounds=(5,)))
    save_plan(store, plan, rungs)
    files = output.write_outputs(store)
    assert "best" not in files
    assert (
        "slower" in Path(files["section"]).read_text()
        and "the row is left as it is" in Path(files["section"]).read_text()
    )
