"""`--changed` on a rows-only edit (issue 37): which decode cells and numerics a run measures again, from an
earlier run of the work folder whose trace (patches/local/0011) says which config rows each cell read.

The earlier run is the step's own: bench:decode run through its runner on the stand-in of a CUDA build
(tests/unit/trace_probe.py: llama-bench's real recorded output and `--progress` stderr, trace lines in the patch's
format inserted; which cell reads which row is made up: the micro-batch 4 cells read (256, 256, 8), the others
(256, 256, 16)). Then the plan for each case, and the second run with it."""

from __future__ import annotations

from pathlib import Path

from patchkit.measure import config_trace
from patchkit.report import summary
from patchkit.report.runview import RunView
from patchkit.results import Bundle, Status, Step
from patchkit.run import rowscope
from patchkit.run.scope import Scope
from tests.unit import trace_probe as probe
from tests.unit.test_config_trace import USAGE, _decode, _series

ROW8 = {"file": "ggml/src/ggml-cuda/fattn-mma-f16.cuh", "macro": "GGML_CUDA_FATTN_MMA_CONFIG_CASE", "DKQ": 256}
ROW8 |= {"DV": 256, "ncols": 8, "nthreads": 128, "occupancy": 2, "nbatch_fa": 64}
ON = config_trace.tracing(_series(), "cuda", [USAGE])


def _rows(ncols: int) -> list[dict]:
    """A row edit of the (256, 256, ncols) row: the old row and the new (nbatch_fa 64 -> 32), as the scope has them."""
    return [{**ROW8, "ncols": ncols}, {**ROW8, "ncols": ncols, "nbatch_fa": 32}]


def _scope(rows: list[dict], since: str = "h1", why: str = "only rows of [[affects]] macros changed") -> Scope:
    return Scope(changed={"+0001": {"since": since, "files": [ROW8["file"]], "rows": rows, "why": why}})


def _plan(tmp_path: Path, sc: Scope, tracing=ON) -> rowscope.DecodePlan:
    argvs = Bundle.open(tmp_path / "runs" / "r1").step("bench:decode").data["argvs"]
    return rowscope.decode_plan(sc, tracing, tmp_path / "runs", tmp_path / "runs" / "r2", argvs)


def test_a_row_edit_read_by_some_cells_measures_only_those(tmp_path):
    _decode(tmp_path / "a", ON)  # the earlier run r1: +0001 at head h1, traced
    plan = _plan(tmp_path / "a", _scope(_rows(8)))
    assert {(k[3], k[5]) for k in plan.skip} == {(0, 16), (256, 16), (0, 1), (256, 1)}
    (first,) = plan.first
    # cut to micro-batch 4, with the largest kept first where a depth is prefilled (at the first test's micro-batch)
    assert first[first.index("-ub") + 1] == "16,4" and first[first.index("-d") + 1] == "0,256"
    assert plan.runs == ("r1",) and "4 decode cells read no changed row" in plan.why and "stand in r1" in plan.why
    # the run with the plan: one process an arm, its micro-batch 4 cells only; the others are not this run's
    for v in ("base", "+0001"):
        (tmp_path / "a" / "bin" / v / "calls.jsonl").unlink()
    _, d, calls = _decode(tmp_path / "a", ON, name="r2", plan=plan)
    every = calls["base"] + calls["+0001"]
    assert len(every) == 3 and all(c["argv"][c["argv"].index("-ub") + 1] == "16,4" for c in every)
    assert {(r["depth"], r["n_ubatch"]) for r in d["rows"]} == {(0, 4), (256, 4)}
    assert d["rows_scope"]["why"] == plan.why and len(d["rows_scope"]["cells"]) == 4
    # the report says what was left out and where it stands
    run = Bundle.open(tmp_path / "a" / "runs" / "r2")
    assert RunView(run, env={}).rows_scope_lines() == [plan.why]
    line = "`--changed`: 4 decode cells read no changed row and are not measured again (they stand in r1); 2 measured."
    assert line in summary.scope_lines("", {"changed": {}, "rows_lines": [plan.why]})


def test_the_next_edit_leaves_out_again_what_the_last_run_left_out_and_names_where_its_numbers_stand(tmp_path):
    """r1 measured everything at h1; r2 (at h2, an edit of the 8-column row) only the micro-batch 4 cells; r3 (another
    edit of that row, since h2) finds r2: the cells r2 left out carry r1's reads, so they are left out again (not
    lost: a micro-batch 1 cell r2 never ran is neither measured nor forgotten), and their numbers stand in r1."""
    _decode(tmp_path, ON)
    plan2 = _plan(tmp_path, _scope(_rows(8)))
    _, d2, _ = _decode(tmp_path, ON, name="r2", plan=plan2, head="h2")
    carried = [r for r in d2["config_reads"] if r.get("carried_from")]
    # every cell left out carries r1's reads (micro-batch 16 too, which r2's cut process ran and dropped)
    arms = ("base", "base#2", "+0001")
    assert sorted((r["variant"], r["ident"][5], r["carried_from"]) for r in carried) == sorted(
        (a, ub, "r1") for a in arms for ub in (16, 16, 1, 1)
    )
    plan3 = rowscope.decode_plan(_scope(_rows(8), since="h2"), ON, tmp_path / "runs", None, d2["argvs"])
    assert plan3.skip == plan2.skip and plan3.first == plan2.first and plan3.runs == ("r1",)
    assert "4 decode cells read no changed row" in plan3.why and "stand in r1" in plan3.why


def test_an_earlier_run_whose_processes_never_said_the_trace_was_on_measures_every_cell(tmp_path, monkeypatch):
    """The reads arrived but no `trace: on` line (premise: a process without it is untraced): nothing is left out,
    even the cells whose recorded reads hit no changed row, and the line says why."""
    monkeypatch.setenv("TRACE_PROBE_NO_ON", "1")
    _, d, _ = _decode(tmp_path, ON)
    assert d["config_reads"] and not any(r["traced"] for r in d["config_reads"])
    plan = _plan(tmp_path, _scope(_rows(8)))
    assert not plan.skip and plan.first is None
    assert "6 show no 'trace: on' line (reads unknown)" in plan.why, plan.why


def test_a_cut_without_depths_keeps_only_the_cells_to_measure():
    argv = [*probe.ARGV]
    argv[argv.index("-d") + 1] = "0"
    ident = ("llama", 16, 0, 0, 2048, 4, "q4_0", "q4_0", 0)
    groups = {ident: 0, (*ident[:5], 16, *ident[6:]): 0}
    out = rowscope._cut(argv, 0, groups, {(*ident[:5], 16, *ident[6:])})
    assert out[out.index("-ub") + 1] == "4"  # nothing to prefill: no larger micro-batch added
    assert rowscope._cut(argv, 1, groups, set()) == tuple(argv)  # a process with no recorded cell runs whole


def test_a_row_edit_read_by_no_cell_measures_none(tmp_path):
    _decode(tmp_path, ON)
    plan = _plan(tmp_path, _scope(_rows(32)))
    assert len(plan.skip) == 6 and plan.first == (None,)
    for v in ("base", "+0001"):
        (tmp_path / "bin" / v / "calls.jsonl").unlink()
    b, _, calls = _decode(tmp_path, ON, name="r2", plan=plan, head="h2")
    assert calls == {"base": [], "+0001": []}
    step = b.step("bench:decode")
    assert step.status == Status.NOT_RUN and step.reason == plan.why
    # the next edit's run (since this run's head) leaves them out again: the reads carried, r1 named
    carried = step.data["config_reads"]
    assert len(carried) == 18 and {r["carried_from"] for r in carried} == {"r1"}
    again = rowscope.decode_plan(_scope(_rows(32), since="h2"), ON, tmp_path / "runs", None, step.data["argvs"])
    assert again.skip == plan.skip and again.runs == ("r1",)


def test_a_change_outside_the_rows_measures_every_cell(tmp_path):
    _decode(tmp_path, ON)
    plan = _plan(
        tmp_path, _scope([], why="ggml/src/ggml-cuda/fattn.cu: changed outside the rows of an [[affects]] rule")
    )
    assert not plan.skip and plan.first is None
    assert plan.why == (
        "--changed: every decode cell measured: +0001: ggml/src/ggml-cuda/fattn.cu: changed outside the rows of an "
        "[[affects]] rule"
    )


def test_no_earlier_run_at_the_variants_last_head_measures_every_cell(tmp_path):
    _decode(tmp_path, ON)
    plan = _plan(tmp_path, _scope(_rows(8), since="0123456789abcdef"))  # r1 measured +0001 at h1, not there
    assert not plan.skip and "no earlier run in this work folder measured +0001 at 0123456789ab" in plan.why
    empty = rowscope.decode_plan(_scope(_rows(8)), ON, tmp_path / "none", None, [probe.ARGV])
    assert not empty.skip and "no earlier run" in empty.why


def test_an_earlier_run_without_a_trace_or_a_cpu_run_measures_every_cell(tmp_path):
    _decode(tmp_path, config_trace.tracing(_series(False), "cuda", [USAGE]))  # r1 without 0011: no trace
    plan = _plan(tmp_path, _scope(_rows(8)))
    assert not plan.skip and "no earlier run" in plan.why
    cpu = _plan(tmp_path, _scope(_rows(8)), tracing=config_trace.tracing(_series(), "cpu"))
    assert cpu.why == "--changed: every decode cell measured: no config-read trace on the cpu backend (only CUDA " + (
        "reads the FA MMA config rows)"
    )
    assert rowscope.decode_plan(None, ON, tmp_path / "runs", None, []).why == ""  # not a --changed run: no line


def _numerics_run(
    tmp_path: Path, keys: list[dict], name: str = "n1", head: str = "h1", plan=None, traced: bool = True
) -> None:
    """A recorded numerics step with +0001's process reading `keys` (or, with `plan`, the step as a run that left
    every changed variant out records it: not run, the earlier reads carried)."""
    meta = {"variants": [{"name": "base", "head": "h0"}, {"name": "+0001", "head": head}]}
    b = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id=name, meta=meta)
    reads = [{"variant": "+0001", "log": "raw/gen-d0-p0-+0001.log", "keys": keys, "traced": traced}]
    reads.append({"variant": "base", "log": "raw/gen-d0-p0-base.log", "keys": [probe_key(8)], "traced": True})
    if plan is None:
        b.record(Step(name="numerics", status=Status.OK, data={"pairs": [], "config_reads": reads}))
    else:
        b.record(Step(name="numerics", status=Status.NOT_RUN, reason=plan.why, data=plan.data()))
    b.save()


def probe_key(ncols: int) -> dict:
    return config_trace.parse_key(probe.trace_line((256, 256, ncols)))


def test_numerics_is_not_run_again_for_a_variant_none_of_whose_processes_read_a_changed_row(tmp_path):
    _numerics_run(tmp_path, [probe_key(16)])
    plan = rowscope.numerics_plan(_scope(_rows(8)), ON, tmp_path / "runs", None)
    assert plan.left == {"+0001": "n1"} and "not run again (stands in n1)" in plan.why
    plan = rowscope.numerics_plan(_scope(_rows(16)), ON, tmp_path / "runs", None)
    assert plan.left == {} and "+0001: its processes read a changed row" in plan.why
    plan = rowscope.numerics_plan(_scope([], why="x: not rows"), ON, tmp_path / "runs", None)
    assert plan.left == {} and plan.why == "--changed: numerics of every changed variant run: +0001: x: not rows"
    plan = rowscope.numerics_plan(_scope(_rows(8), since="other"), ON, tmp_path / "runs", None)
    assert plan.left == {} and "no earlier run with a config-read trace" in plan.why
    cpu = rowscope.numerics_plan(_scope(_rows(8)), config_trace.tracing(_series(), "cpu"), tmp_path / "runs", None)
    assert cpu.left == {} and "no config-read trace on the cpu backend" in cpu.why


def test_numerics_of_a_process_that_never_said_the_trace_was_on_runs_again(tmp_path):
    _numerics_run(tmp_path, [probe_key(16)], traced=False)
    plan = rowscope.numerics_plan(_scope(_rows(8)), ON, tmp_path / "runs", None)
    assert plan.left == {} and "+0001: a process of n1 shows no 'trace: on' line" in plan.why


def test_numerics_left_out_carries_its_reads_to_the_next_edit(tmp_path):
    _numerics_run(tmp_path, [probe_key(16)])
    first = rowscope.numerics_plan(_scope(_rows(8)), ON, tmp_path / "runs", None)
    _numerics_run(tmp_path, [], name="n2", head="h2", plan=first)  # the run that left +0001's numerics out
    again = rowscope.numerics_plan(_scope(_rows(8), since="h2"), ON, tmp_path / "runs", None)
    assert again.left == {"+0001": "n1"} and "stands in n1" in again.why
