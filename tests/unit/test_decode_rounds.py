"""bench:decode measured like kernel timing (issue 27): interleaved rounds with an A/A copy of base, rounds
until settled or capped, verdicts against the decode A/A floor; the report shows the floor and verdicts.

The llama-bench output is real (tests/fixtures/cpu, recorded on this project's CPU machine) and replayed
through the step's own runner. As a test input the A/A copy's logs are +0001's recorded output: the point
is that the floor is what base and its copy differ by, and that every verdict is judged against it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchkit import options, parsers
from patchkit.measure import decode, decode_args, stats
from patchkit.results import Bundle
from patchkit.results.data.decode import DecodeData
from patchkit.run import replay
from tests.unit.test_report import render, section

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cpu"
BASE, OTHER = FIX / "bench_pp_tg_depths_base.json", FIX / "bench_pp_tg_depths_0001.json"


def imported_two_rounds(tmp_path: Path) -> tuple[options.Context, Path, Bundle]:
    """The recorded pp/tg outputs imported as two rounds of base and +0001, with +0001's logs as the A/A
    copy's (raw/decode-r{r}-base_aa2.log): (context, run folder, its bundle)."""
    ctx = options.context(recipe=str(ROOT / "recipes" / "default.toml"), work=str(tmp_path / "w"))
    logs = (("base", BASE), ("+0001", OTHER), ("base", BASE), ("+0001", OTHER))  # two rounds each
    replay.import_logs(ctx, replay.ImportRequest(tool="llama-bench", logs=logs, backend="cpu"))
    (run,) = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    b = Bundle.open(run)
    for r in (1, 2):
        shutil.copy(run / "raw" / f"decode-r{r}-+0001.log", run / "raw" / f"decode-r{r}-base_aa2.log")
    return ctx, run, b


def _run(tmp_path: Path, timing: dict) -> tuple[Path, dict]:
    ctx, run, b = imported_two_rounds(tmp_path)
    step = b.step("bench:decode")
    step.logs = [*step.logs, "raw/decode-r1-base_aa2.log", "raw/decode-r2-base_aa2.log"]
    step.data.update(timing=timing, model={"path": "(imported)", "n_layer": 2, "n_params": 84943872})
    b.record(step)
    b.save()
    again = replay.reparse_step(Bundle.open(run), "bench:decode", ctx.recipe)
    b = Bundle.open(run)
    b.record(again)
    b.save()
    return run, json.loads(json.dumps(again.data))


def test_the_floor_is_base_against_its_copy_and_every_verdict_is_judged_against_it(tmp_path):
    t = {"min_rounds": 2, "max_rounds": 2, "max_noise": 0.0, "max_seconds": 0.0, "aa": True}
    run, d = _run(tmp_path, t)
    assert d["aa_label"] == "base#2" and d["rounds_run"] == 2
    assert {r["variant"] for r in d["rows"]} == {"base", "+0001"}  # the copy is not a variant row
    assert all(r["rounds"] == 2 and r["stop"] == "max_rounds" and len(r["samples_ts"]) == 4 for r in d["rows"])
    floor = max(abs(a["ratio"] - 1) for a in d["aa"])
    assert len(d["aa"]) == 4 and d["noise_floor"] == pytest.approx(floor) and floor > 0
    rows = {(r["variant"], r["test"]): r for r in d["rows"]}
    for v in d["vs_base"]:
        rr = stats.ratio(rows[("base", v["test"])]["samples_ts"], rows[(v["variant"], v["test"])]["samples_ts"])
        assert v["verdict"] == stats.verdict(rr, floor, higher_is_better=True)
    md = section(render(run), "### Decode")
    assert f"A/A noise floor {100 * floor:.1f} %" in md.replace("\n", " ")
    assert "Rounds: 2 to 2 interleaved rounds with an A/A copy of base (2 run)" in md
    tg = next(r for r in d["rows"] if r["variant"] == "base" and r["test"] == "tg4")
    assert f"tg4 {1e3 / tg['median']:.3f} ms, {1e6 / tg['median'] / 2:.1f} us a layer" in md
    assert "| llama ?B all F32, 0.08B params |" in md  # llama.cpp's '?B' with the model's size
    assert "GPU clocks" not in md  # an import has no clock samples


def test_a_test_settles_when_every_binary_is_quiet_and_old_runs_keep_one_round_and_no_copy(tmp_path):
    t = {"min_rounds": 1, "max_rounds": 2, "max_noise": 5.0, "max_seconds": 0.0, "aa": True}
    _, d = _run(tmp_path, t)
    assert d["rounds_run"] == 1 and all(r["stop"] == "settled" and r["rounds"] == 1 for r in d["rows"])
    old = decode.DecodeTiming.from_data(DecodeData.from_dict({"rounds": 3}, "x"))
    assert (old.min_rounds, old.max_rounds, old.aa) == (3, 3, False)


def test_a_later_round_runs_only_the_open_depths():
    args = ["-m", "x.gguf", "-d", "0,32768,122880", "-r", "2"]
    assert decode_args.with_values(args, "-d", [122880]) == ["-m", "x.gguf", "-d", "122880", "-r", "2"]
    assert args[3] == "0,32768,122880"


def test_each_cell_is_judged_against_its_own_floor_and_noisy_above_the_largest(tmp_path):
    """issue 36 / 34: a floor per cell (its A/A interval's farthest edge), never one noisy test's for all;
    a cell whose floor is above max-floor is 'noisy' and the summary counts it apart."""
    t = {"min_rounds": 2, "max_rounds": 2, "max_noise": 0.0, "max_seconds": 0.0, "aa": True, "per_cell": True}
    run, d = _run(tmp_path, {**t, "max_floor": 1e-6})
    rows = {(r["variant"], r["test"]): r for r in d["rows"]}
    floors = {}
    for a in d["aa"]:
        rr = stats.ratio(rows[("base", a["test"])]["samples_ts"], rows[("+0001", a["test"])]["samples_ts"])
        assert a["floor"] == pytest.approx(stats.cell_floor(rr)) and a["floor"] > 1e-6
        floors[a["test"]] = a["floor"]
    assert len(set(floors.values())) == len(floors) == 4  # four cells, four floors
    assert d["noise_floor"] == pytest.approx(max(floors.values()))
    for v in d["vs_base"]:
        assert v["floor"] == floors[v["test"]] and v["verdict"] == stats.NOISY
    md = render(run)
    dec = section(md, "### Decode")
    assert "A/A floors per cell (`base#2` against base, 4 cells)" in dec
    assert dec.count("noisy (floor ") == 4 and "per-cell verdicts: 4 noisy" in dec
    assert "4 noisy" in section(md, "## Summary") or "4 noisy" in md.split("### Decode")[0]


def test_the_matrix_prefills_each_depth_once_a_process_largest_micro_batch_first():
    kw = {"type_k": "q4_0", "type_v": "q4_0", "repetitions": 2, "threads": 0, "ngl": 99, "extra": ()}
    argvs = decode.matrix_argvs(
        Path("m.gguf"), depths=(0, 32768, 122880), pp_depths=(0, 4096, 32768), n_prompt=(512,), n_gen=(32,),
        ubatch=(1, 2, 512), **kw,
    )  # fmt: skip

    def at(a, flag):
        return a[a.index(flag) + 1] if flag in a else ""

    got = [(at(a, "-p"), at(a, "-n"), at(a, "-d"), at(a, "-ub")) for a in argvs]
    assert got == [
        ("512", "0", "0,4096", "512,2,1"),
        ("512", "0", "32768", "512,2,1"),
        ("0", "32", "0,32768,122880", ""),
    ]
    one = decode.matrix_argvs(
        Path("m.gguf"), depths=(0, 4096), pp_depths=(), n_prompt=(0,), n_gen=(32,), ubatch=(), **kw
    )
    assert len(one) == 1 and one[0][one[0].index("-d") + 1] == "0,4096"  # no pp tests: one process as before


def test_a_later_round_runs_a_process_only_for_its_open_cells():
    st = decode._State()
    k = decode.IDENTITY.index("n_depth"), decode.IDENTITY.index("n_ubatch")

    def ident(depth, ub):
        x = [None] * len(decode.IDENTITY)
        x[k[0]], x[k[1]] = depth, ub
        return tuple(x)

    argv = ["-p", "512", "-n", "0", "-d", "0,32768", "-ub", "512,4,1"]
    for depth in (0, 32768):
        for ub in (512, 4, 1):
            st.rounds[ident(depth, ub)], st.group[ident(depth, ub)] = 1, 0
            st.stop[ident(depth, ub)] = "settled" if (depth, ub) != (32768, 4) else None
    st.stop = {i: s for i, s in st.stop.items() if s}
    assert decode._argv_of(2, 0, argv, st) == ["-p", "512", "-n", "0", "-d", "32768", "-ub", "4"]
    assert decode._argv_of(2, 1, argv, st) is None and decode._argv_of(1, 1, argv, st) == argv


def test_recorded_matrix_process_prefills_its_depth_once_and_gives_a_cell_per_micro_batch():
    """The premise of matrix_argvs on llama-bench's real output (tests/fixtures/cpu/bench_matrix_pp_base.*):
    one process of pp16 at -ub 16,4,1 and -d 0,256 prefills depth 256 once, later tests restore it, and every
    (micro-batch, depth) is its own cell (identity)."""
    progress = (FIX / "bench_matrix_pp_base.progress.txt").read_text().splitlines()
    depth_runs = [ln for ln in progress if "depth run" in ln]
    assert len(depth_runs) == 6 and [ln for ln in depth_runs if "(cached)" not in ln] == [depth_runs[0]]
    recs = parsers.parse_llama_bench_json((FIX / "bench_matrix_pp_base.json").read_text(), "base")
    assert [(r.n_ubatch, r.n_depth) for r in recs] == [(u, d) for u in (16, 4, 1) for d in (0, 256)]
    assert len({decode.identity(r) for r in recs}) == 6


def test_stored_decode_data_is_strict_and_round_trips_a_committed_step():
    """bench:decode's data is one class (patchkit.results.data.decode): a committed matrix step loads and dumps
    back unchanged; a misspelt or mistyped key is one line naming the step, the cell and the key."""
    from patchkit.errors import ResultsError
    from patchkit.results.upgrade import upgrade

    p = ROOT / "examples" / "cpu-matrix-real" / "run" / "results.json"
    d = upgrade(json.loads(p.read_text())["steps"])["bench:decode"]["data"]
    typed = DecodeData.from_dict(d, str(p))
    assert typed.to_dict() == d and typed.measured and typed.timing.per_cell is True
    assert {v.verdict for v in typed.vs_base} <= {"same", "faster", "slower", "noisy", "too few samples"}
    bad = json.loads(json.dumps(d))
    bad["rows"][1]["medain"] = bad["rows"][1].pop("median")
    with pytest.raises(ResultsError, match=r"x: data\.rows\[1\]: unknown key 'medain'"):
        DecodeData.from_dict(bad, "x: data")
    with pytest.raises(ResultsError, match=r"data\.vs_base\[0\]\.ratio: expected a number, got str"):
        DecodeData.from_dict({**d, "vs_base": [{**d["vs_base"][0], "ratio": "1.0"}]}, "x: data")
