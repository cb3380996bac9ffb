"""bench:decode's arms share their depth states across rounds (issue 37, patches/local/0010), on the real CPU
build of base's llama-bench and the recipe's CPU-sized synthetic model: round 1 of each arm prefills depth 256
and saves it, round 2 loads it (llama-bench's stderr says which), both rounds give samples, and the folders
are gone when the step ends. About 20 s on 2 cores after the CPU build (the cpu_build fixture)."""

from __future__ import annotations

from pathlib import Path

from patchkit import options
from patchkit.measure import decode, decode_args, depth_state
from patchkit.measure.tool import Bins
from patchkit.results import Bundle

ROOT = Path(__file__).resolve().parents[2]


def test_each_arm_prefills_in_its_first_round_and_loads_in_the_next(cpu_build, work, tmp_path):
    _r, manifests = cpu_build
    ctx = options.context(recipe=str(ROOT / "recipes" / "default.toml"), work=str(work.root))
    model, info = decode.synth_model(ctx, backend="cpu")
    res = manifests["base"]["result"]
    base = Bins(variant="base", dir=Path(work.root, res["bin_dir"]), key=manifests["base"].get("key", "base"))
    kw = {"type_k": "q4_0", "type_v": "q4_0", "repetitions": 2, "threads": 2, "ngl": 0, "extra": ()}
    argv = decode_args.decode_args(model, depths=(256,), n_prompt=(0,), n_gen=(4,), ubatch=(), **kw)
    bundle = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id="ds", meta={})
    timing = decode.DecodeTiming(min_rounds=2, max_rounds=2, max_noise=0.0, max_seconds=0.0)
    with depth_state.states(tmp_path / "work") as ds:
        step = decode.run_decode(
            bundle, [base], model=model, model_info=info, argvs=[argv], timing=timing, depth_states=ds
        )
        kept = sorted(p.name for p in ds.root.glob("*/*"))
    assert step.status.value == "ok", step.reason
    # two arms (base and its A/A copy), each with its own folder and one state file: depth 256, q4_0 K and V
    assert kept == ["depth-256-q4_0-q4_0.state"] * 2
    assert not (tmp_path / "work" / "depth-state").exists()
    for arm in ("base", "base_aa2"):
        first = (bundle.path / "raw" / f"decode-r1-{arm}.stderr.log").read_text()
        second = (bundle.path / "raw" / f"decode-r2-{arm}.stderr.log").read_text()
        assert "depth run 1/2: state saved to" in first and "state loaded" not in first, first[-2000:]
        assert "depth run 1/2: state loaded from" in second and "state saved" not in second, second[-2000:]
    rows = {r["variant"]: r for r in step.data["rows"]}
    assert len(rows["base"]["samples_ts"]) == 4 and rows["base"]["rounds"] == 2
