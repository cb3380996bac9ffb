"""Predicted occupancy in the sweep (patchkit.sweep.occupancy), on recorded real outputs only.

- The compile logs of examples/h200-sweep are real but were compiled without ptxas's report: their
  points get no prediction, and say so.
- Real ptxas reports of two rows of this sweep's table: examples/h200-occupancy/cold/raw/
  check-cuda-{80,86,89}-{+0001,+0001+0002}.log, the compile checks of bench:occupancy on the H200 run
  (same Ninja log format, same units as the sweep's). +0001's row is the sweep's starting row
  (128, 2, 64); +0001+0002's is its point nthreads64-occupancy4-nbatch_fa32 (patch 0002 is that row
  change, docs/sweep.md). They stand in as those points' checks for sm_80/86/89.
- The launch formula against ncu's recorded launches of those rows (tests/fixtures/occupancy).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from patchkit.measure import occupancy_formula as occ
from patchkit.parsers.ncu import parse_ncu_occupancy
from patchkit.sweep import occupancy as predicted
from patchkit.sweep import output
from patchkit.sweep.spec import SweepError, override, parse_sweep
from patchkit.sweep.store import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "h200-sweep"
CHECKS = REPO / "examples" / "h200-occupancy" / "cold" / "raw"
NCU = REPO / "tests" / "fixtures" / "occupancy"
KERNEL = "flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>"
START = "nthreads128-occupancy2-nbatch_fa64-nstages_target2-nbatch_K2128-nbatch_V2128-Q_in_regtrue"
SEED = "nthreads64-occupancy4-nbatch_fa32-nstages_target2-nbatch_K2128-nbatch_V2128-Q_in_regtrue"
VARIANT = {START: "+0001", SEED: "+0001+0002"}
TARGETS = ["RTX 4070", "A100 SXM4 80GB", "RTX 3090"]


def _ptxas_used(log: Path, arch: str) -> tuple[int, int]:
    """Registers and smem of the launched kernel (template bools 0, 0, 0), read from the log by hand."""
    text = log.read_text()
    at = text.index("Compiling entry function '_Z18flash_attn_ext_f16ILi256ELi256ELi1ELi8ELb0ELb0ELb0EE")
    used = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?, \d+ bytes cmem", text[at:])
    assert used and f"for 'sm_{arch}'" in text[at : at + 300]
    return int(used[1]), int(used[2] or 0)


def _folder(tmp_path: Path, *, reference: str = START, filt: str = "none") -> tuple[Store, dict]:
    """A copy of examples/h200-sweep with predictions for TARGETS; the two rows with real ptxas reports
    checked for sm_80/86/89 with those logs; `reference` is the starting row."""
    store = Store(tmp_path / "sweep")
    shutil.copytree(EXAMPLE / "points", store.root / "points")
    (store.root / "logs").mkdir()
    plan = json.loads((EXAMPLE / "sweep.json").read_text())
    plan["archs"] = ["90", "80", "86", "89"]
    plan["spec"]["predict"] = {"targets": TARGETS, "kernel": KERNEL, "launch": "fattn-mma-f16", "filter": filt}
    plan["points"].sort(key=lambda p: p["name"] != reference)
    for p in plan["points"]:
        p["reference"] = p["name"] == reference
    for name, variant in VARIANT.items():
        rec = json.loads((store.root / "points" / f"{name}.json").read_text())
        for a in ("80", "86", "89"):
            shutil.copy2(CHECKS / f"check-cuda-{a}-{variant}.log", store.root / "logs" / f"check-{a}-{name}.log")
            rec["check"][a] = {**rec["check"]["90"], "arch": a, "by": "", "log": f"logs/check-{a}-{name}.log"}
        store.save(rec)
    (store.root / "sweep.json").write_text(json.dumps(plan))
    return store, plan


def test_launch_formula_gives_ncu_recorded_launches():
    """threads and dynamic shared memory by fattn-mma-f16.cuh's nbytes_shared_total = what ncu recorded on
    the H200 for the two rows (kv 122880, the 1-query q4_0 case)."""
    plan = json.loads((EXAMPLE / "sweep.json").read_text())
    rows = {p["name"]: p["row"] for p in plan["points"]}
    args = predicted.kernel_key(KERNEL)[1]
    for name, variant in VARIANT.items():
        text = (NCU / f"ncu-occ-kv122880-{variant}.log").read_text()
        got = [k for k in parse_ncu_occupancy(text, "ncu") if k.kernel_name.startswith("void flash_attn_ext_f16<")]
        assert got, variant
        threads, dyn = predicted.LAUNCHES["fattn-mma-f16"](rows[name], args, "9.0")
        assert (threads, dyn) == (int(got[0].block_size), int(got[0].smem_dynamic))
    assert dyn == 32848  # +0001+0002's, as issue 26 quotes ncu


def test_predicted_column_equals_the_formula(tmp_path):
    store, plan = _folder(tmp_path)
    preds = predicted.predictions(store.root, plan, store.load_records(plan))
    rows = {p["name"]: p["row"] for p in plan["points"]}
    for name, variant in VARIANT.items():
        threads, dyn = predicted.LAUNCHES["fattn-mma-f16"](rows[name], predicted.kernel_key(KERNEL)[1], "8.9")
        for t in TARGETS:
            p = preds[name][t]
            regs, smem = _ptxas_used(CHECKS / f"check-cuda-{p['arch']}-{variant}.log", p["arch"])
            g = occ.gpu(t)
            want = occ.occupancy(occ.Launch(regs, threads, smem, dyn), occ.limits(g.cc))
            assert (p["registers"], p["blocks_per_sm"], p["limiter"]) == (regs, want.blocks_per_sm, want.limiter)
            assert p["theoretical_pct"] == round(100 * want.theoretical, 2)
    # the numbers docs/occupancy-prediction.md states for these rows
    assert preds[START]["RTX 4070"]["registers"] == 198 and preds[START]["RTX 4070"]["blocks_per_sm"] == 1
    assert preds[SEED]["RTX 4070"]["blocks_per_sm"] == 3 and preds[SEED]["RTX 4070"]["limiter"] == "shared memory"
    assert preds[START]["A100 SXM4 80GB"]["limiter"] == "registers and shared memory"
    # the other points: no ptxas report for these archs (the H200 sweep checked sm_90 only), never a guess
    other = next(n for n in preds if n not in VARIANT)
    assert all("blocks_per_sm" not in p for p in preds[other].values())


def test_h200_sweep_logs_have_no_ptxas_report_and_say_so(tmp_path):
    store = Store(tmp_path / "sweep")
    shutil.copytree(EXAMPLE, store.root)
    plan = json.loads((EXAMPLE / "sweep.json").read_text())
    plan["spec"]["predict"] = {"targets": ["H200"], "kernel": KERNEL, "launch": "fattn-mma-f16", "filter": "none"}
    preds = predicted.predictions(store.root, plan, store.load_records(plan))
    assert preds[START]["H200"]["why"].startswith("sm_90 compiled by the start variant's build")
    assert "without --ptxas-options=-v" in preds[SEED]["H200"]["why"]
    assert preds["nthreads128-occupancy2-nbatch_fa32-nstages_target2-nbatch_K2128-nbatch_V2128-Q_in_regtrue"]["H200"][
        "why"
    ] == ("invalid")


def test_filter_removes_exactly_the_points_below_the_start(tmp_path):
    # a sweep from +0001+0002's row (as the seed-dropped specs of docs/sweep.md start): the 128-thread row
    # is predicted 1 block/SM on the RTX 4070 (shared memory), the start 3: dropped; every point without a
    # prediction on the RTX 4070 (not checked for sm_89, or invalid) is kept
    store, plan = _folder(tmp_path, reference=SEED, filt="below-start")
    preds = predicted.predictions(store.root, plan, store.load_records(plan))
    assert predicted.filtered(plan, preds) == {START: "predicted 1 blocks/SM on RTX 4070 < the starting row's 3"}
    # from the real starting row nothing is below it
    store2, plan2 = _folder(tmp_path / "b", filt="below-start")
    assert predicted.filtered(plan2, predicted.predictions(store2.root, plan2, store2.load_records(plan2))) == {}
    # filter off: nothing dropped
    off = copy.deepcopy(plan)
    off["spec"]["predict"]["filter"] = "none"
    assert predicted.filtered(off, preds) == {}


def test_table_shows_predicted_columns_and_the_assumption(tmp_path):
    store, _ = _folder(tmp_path, reference=SEED, filt="below-start")
    output.write_outputs(store)
    md = (store.out / "sweep.md").read_text()
    assert "| predicted RTX 4070 (sm_89) | predicted A100 SXM4 80GB (sm_80) | predicted RTX 3090 (sm_86) |" in md
    line = next(ln for ln in md.splitlines() if ln.startswith(f"| {SEED} (start)"))
    assert line.endswith(
        "| 3 (shared memory), 12.5 % | 4 (registers and shared memory), 12.5 % | 3 (shared memory), 12.5 % |"
    )
    assert "filtered: predicted 1 blocks/SM on RTX 4070" in md
    assert "Predicted, not measured" in md and "assumes the host picks that launch" in md
    assert "Predicted blocks per SM" in (store.out / "section.md").read_text()


def _spec(**predict) -> dict:
    return {
        "file": "ggml/src/ggml-cuda/fattn-mma-f16.cuh",
        "function": "ggml_cuda_fattn_mma_get_config_ampere",
        "row": {"DKQ": 256, "DV": 256, "ncols": 8},
        "params": {"nthreads": [64, 128]},
        "start": "+0001",
        "predict": {"kernel": KERNEL, **predict},
    }


def test_spec_rejects_an_unknown_target_gpu_in_one_line():
    with pytest.raises(SweepError) as e:
        parse_sweep(_spec(targets=["RTX 4070", "RTX 9999"]), "x.toml: sweep")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("x.toml: sweep.predict.targets: unknown GPU 'RTX 9999'")
    with pytest.raises(SweepError, match=r"^--target-gpu: unknown GPU 'GTX 280'"):
        override(parse_sweep(_spec(targets=["A100"]), "x.toml: sweep"), target_gpus=("GTX 280",))
    with pytest.raises(SweepError, match=r"^x.toml: sweep.predict.filter: expected one of none, below-start"):
        parse_sweep(_spec(targets=["A100"], filter="rank"), "x.toml: sweep")


def test_spec_and_flags_resolve_targets_and_filter():
    spec = parse_sweep(_spec(targets=["rtx4070", "A100"]), "x.toml: sweep")
    assert spec.predict.targets == ("RTX 4070", "A100 SXM4 80GB") and spec.predict.filter == "none"
    spec = override(spec, target_gpus=("3090",), occupancy_filter="below-start")
    assert spec.predict.targets == ("RTX 3090",) and spec.predict.filter == "below-start"
    with pytest.raises(SweepError, match=r"^--target-gpu: needs the spec's predict table"):
        override(_no_predict(), target_gpus=("A100",))
    with pytest.raises(SweepError, match=r"target GPU RTX 4070 \(cc 8.9\) is not compile-checked: add 89"):
        predicted.check_targets(parse_sweep(_spec(targets=["RTX 4070"]), "x").predict, ("90", "80"), "x.predict")


def _no_predict():
    s = _spec()
    del s["predict"]
    return parse_sweep(s, "x.toml: sweep")
