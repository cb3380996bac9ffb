"""The decode table on real H200 cells: the two finished rounds of the default GPU matrix in
examples/h200-partial-2026-12-05/cold/raw (the run was cut off in round 3, so its results.json has no decode step;
the step is re-derived here from those raw logs by decode's own reparse, rounds capped at 2)."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest

from patchkit import options
from patchkit.measure import decode
from patchkit.measure import model as model_mod
from patchkit.results import Bundle, Status, Step
from patchkit.results.data.decode import DecodeData
from patchkit.run import replay
from tests.unit.test_report import render, section, tables

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "h200-partial-2026-12-05" / "cold"
TIMING = {
    "min_rounds": 2,
    "max_rounds": 2,
    "max_noise": 0.01,
    "max_seconds": 240.0,
    "aa": True,
    "max_floor": 0.03,
    "per_cell": True,
}


@pytest.fixture(scope="module")
def h200(tmp_path_factory) -> tuple[Path, DecodeData]:
    run = tmp_path_factory.mktemp("h200") / "cold"
    shutil.copytree(RUN, run)
    logs = sorted(
        f"raw/{p.name}"
        for p in (run / "raw").iterdir()
        if re.match(r"(clocks-)?decode-r[12]-", p.name) and not p.name.endswith(".stderr.log")
    )
    argvs = [(run / "raw" / f"decode-r1-base-{i}.log").read_text().split("\n", 1)[0].split()[2:] for i in (1, 2)]
    model = Path(argvs[0][1])
    ctx = options.context(recipe=str(ROOT / "recipes" / "default.toml"), work=str(run.parent / "w"))
    spec = decode.model_spec(ctx, "cuda")  # the default recipe's GPU model: its file name is its spec's hash
    assert model.name == f"synthetic-{hashlib.sha256(repr(spec).encode()).hexdigest()[:12]}.gguf"
    data = {"model": model_mod.describe(spec, model), "model_path": str(model), "argvs": argvs, "rounds": 2}
    b = Bundle.open(run)
    b.record(
        Step(name="bench:decode", status=Status.ERROR, reason="cut off", logs=logs, data={**data, "timing": TIMING})
    )
    b.save()
    step = replay.reparse_step(Bundle.open(run), "bench:decode", ctx.recipe)
    b = Bundle.open(run)
    b.record(step)
    b.save()
    assert step.status == Status.OK, step.reason
    return run, DecodeData.from_step(step)


def _vs(d: DecodeData) -> dict[tuple[str, str, int], object]:
    return {(v.variant, v.test, v.n_ubatch): v for v in d.vs_base}


def test_two_real_rounds_give_every_cell_of_the_default_matrix_with_its_own_floor(h200):
    _, d = h200
    assert d.rounds_run == 2 and d.aa_label == "base#2" and len(d.aa) == 17  # 14 pp cells, 3 tg cells
    assert {x.variant for x in d.rows} == {"base", "+0001", "+0001+0002"} and len(d.vs_base) == 34
    assert all(x.rounds == 2 and len(x.samples_ts) == 4 for x in d.rows)  # -r 2, two rounds
    assert sorted({x.n_ubatch for x in d.rows if x.n_prompt}) == [1, 2, 4, 8, 16, 64, 512]
    assert all(v.floor is not None and v.verdict for v in d.vs_base)


def test_the_seeds_claims_cell_by_cell_on_two_rounds(h200):
    """What the two rounds show (synthetic model of the seed's layer shape, GQA 6, q4_0 K/V): ubatch 1 (the
    8-column config 0002 changes; 0001 already moves it) is slower at depth 32768 and not settled at depth 0;
    ubatch 2 is faster at both depths, ubatch 4 the same; every tg cell is noisy (floors above 3 %)."""
    _, d = h200
    vs = _vs(d)
    for v in ("+0001", "+0001+0002"):
        deep1, deep2 = vs[(v, "pp512 @ d32768", 1)], vs[(v, "pp512 @ d32768", 2)]
        assert deep1.verdict == "slower" and deep1.ci_high < 1 - deep1.floor
        assert deep2.verdict == "faster" and deep2.ci_low > 1 + deep2.floor
        assert vs[(v, "pp512", 2)].verdict == "faster"
        assert vs[(v, "pp512", 1)].verdict == "noisy"
        assert vs[(v, "pp512 @ d32768", 4)].verdict == "same"
        assert {vs[(v, t, 512)].verdict for t in ("tg32", "tg32 @ d32768", "tg32 @ d122880")} == {"noisy"}
    assert vs[("+0001+0002", "pp512 @ d32768", 1)].ratio < vs[("+0001", "pp512 @ d32768", 1)].ratio


def test_the_table_is_upstreams_layout_same_cells_folded_others_each_a_row(h200):
    run, d = h200
    sec = section(render(run), "### Decode")
    (tab,) = tables(sec)
    assert tab[0] == [
        "GPU",
        "Model",
        "Microbatch size",
        "Test",
        "variant",
        "t/s base",
        "t/s variant",
        "Speedup",
        "verdict",
    ]
    assert {r[1] for r in tab[1:]} == {"synthetic llama, 4 layers, width 5120, 24/4 heads x 256, q4_0"}
    shown = [v for v in d.vs_base if v.verdict != "same"]
    same = [v for v in d.vs_base if v.verdict == "same"]
    folded = [r for r in tab[1:] if r[2].endswith(" cells)")]
    assert len(tab) - 1 == len(shown) + len(same) - sum(int(r[2].split("(")[1].split()[0]) - 1 for r in folded)
    for v in shown:  # every unsettled or changed cell has its own row, its verdict and floor
        (row,) = [r for r in tab[1:] if (r[2], r[3], r[4]) == (str(v.n_ubatch), v.test, f"`{v.variant}`")]
        assert row[8] == f"{v.verdict} (floor {100 * v.floor:.1f} %)"
    (f,) = [r for r in folded if r[4] == "`+0001`"]  # pp512 @ d32768 at ubatch 16 and 4: one row
    cells = [v for v in same if v.variant == "+0001" and v.test == f[3]]
    assert f[2] == ", ".join(str(v.n_ubatch) for v in cells) + f" ({len(cells)} cells)"
    rs = sorted(v.ratio for v in cells)
    assert f[7] == f"{rs[0]:.3f} to {rs[-1]:.3f}" and f[8].startswith("same (floors ")
    assert "are folded into one row per variant" in sec


def test_the_seeds_claims_cell_by_cell_on_the_finished_h200_matrix():
    """examples/h200-2026-12-05/cold: the default recipe's matrix ran to its end (3 rounds, 6 samples a side).
    Micro-batch 1 at depth 32768 is slower for both variants; micro-batch 2 at depth 32768 is faster (so "no
    change for 2-3 queries" does not hold here); the tg cell at depth 122880 ("+12 % at 120k keys") is noisy:
    its A/A floor is above max-floor, so the run neither confirms nor refutes the claim."""
    run = ROOT / "examples" / "h200-2026-12-05" / "cold"
    d = DecodeData.from_step(Bundle.open(run).step("bench:decode"))
    assert d.rounds_run == 3 and all(len(x.samples_ts) == 6 for x in d.rows)
    vs = _vs(d)
    for v in ("+0001", "+0001+0002"):
        one, two = vs[(v, "pp512 @ d32768", 1)], vs[(v, "pp512 @ d32768", 2)]
        assert one.verdict == "slower" and one.ci_high < 1 - one.floor
        assert two.verdict == "faster" and two.ci_low > 1 + two.floor
        deep = vs[(v, "tg32 @ d122880", 512)]
        assert deep.verdict == "noisy" and deep.floor > 0.03 and deep.ratio > 1
    assert round(vs[("+0001+0002", "pp512 @ d32768", 1)].ratio, 3) == 0.886
    assert round(vs[("+0001+0002", "tg32 @ d122880", 512)].ratio, 3) == 1.064
