"""A series that changes CPU code and moves the numbers, end to end on the real CPU backend (issue 36's CPU
must-show; examples/cpu-fa-gemm-revert is the recipe's full run).

recipes/cpu-fa-gemm-revert.toml carries the revert of upstream's llama.cpp #19422 (the CPU flash-attention
tiled path's GEMM microkernel) on the pinned base, with an F16 K/V cache: prompt processing of 32 or more
query rows goes back to F16-rounded Q, so Gemma 3 270M's KL divergence over real text and its generations
after a real-text prefix move. Its base, build options and local patches are the default recipe's, so it
runs here under the default recipe's name (a copy of the recipe and the patches in tmp): base is the CPU
build conftest's cpu_build has made (builds/seed-fattn/cpu, found by its key) and only the variant is built,
incrementally, in that build folder (12 Ninja steps, about 65 s on the loaded 2 cores).
Kept cheap for CI: one decode round (2 samples a side, so every cell's verdict is "too few samples") of the
recipe's [profile.cpu] matrix (pp64 at micro-batches 16, 32, 64 and tg8, at depths 0 and 512); numerics of
one of the recipe's prompts at depth 256 only (a prompt alone is under the tiled path's 32 rows and cannot
move), 16 generated tokens and two chunks of KL divergence (the fewest: llama-perplexity wants twice its
context in tokens; the copy's [numerics]); no decode cells of the real model (a Gemma llama-bench process
takes 30-70 s on the loaded 2 cores, docs/decode-matrix.md; the example has them).
Measured 2026-12-05 on the shared 2-core machine (load 6.5), the variant already built: 173 s wall, 88 s CPU
(numerics 156 s, test:flash_attn 51 s and bench:decode 45 s beside it); its build in CI adds about 65 s.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "cpu-fa-gemm-revert.toml"
VARIANT = "+revert-19422"
RUN_LAST = True  # it leaves the shared build folder at its variant (conftest sorts it last)
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."  # the recipe's second

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja for the CPU build"
)


def _as_default_recipe(tmp: Path) -> Path:
    """The recipe under the default recipe's name, beside a copy of the patches (paths are the project's)."""
    shutil.copytree(ROOT / "patches", tmp / "patches")
    (tmp / "recipes").mkdir()
    text = RECIPE.read_text()
    named = text.replace('name = "cpu-fa-gemm-revert"', 'name = "seed-fattn"')
    named = named.replace("n-predict = 96", f"n-predict = 16\nkl-chunks = 2\nprompts = [{PROMPT!r}]")
    named, n = re.subn(r"^prompts = \[\n(?:    .*\n)+\]\n", "", named, flags=re.M)
    assert n == 1 and named.count("seed-fattn") == 1 and "n-predict = 16" in named
    path = tmp / "recipes" / "seed-fattn.toml"
    path.write_text(named)
    return path


def test_a_real_cpu_change_moves_the_real_models_numbers(cpu_build, work, cli, tmp_path):
    label = "ci-cpu-change"
    for old in work.runs("seed-fattn").glob(f"*-{label}"):
        shutil.rmtree(old)
    recipe = _as_default_recipe(tmp_path)
    cli(
        "run", "-r", str(recipe), "--backend", "cpu", "--work", str(work.root), "--label", label,
        "--test-jobs", "2", "-j", "2", "--decode-rounds", "1", "--repetitions", "2",
        "--numerics-depths", "256", "--real-n-prompt", "0", "--real-n-gen", "0",
    )  # fmt: skip
    [run] = list(work.runs("seed-fattn").glob(f"*-{label}"))
    steps = json.loads((run / "results.json").read_text())["steps"]
    built = {v["variant"]: v for v in steps["build:cpu"]["data"]["variants"]}
    assert built["base"]["reused"] is True  # the default recipe's base build, not a second one
    assert built[VARIANT]["key"] != built["base"]["key"] and VARIANT not in steps["build:cpu"]["data"]["same_code"]
    # test-backend-ops' FLASH_ATTN_EXT cases of the tiled path pass on both (the CPU checks itself: no reference)
    t = steps["test:flash_attn"]
    assert t["status"] == "ok"
    for v, e in t["data"]["variants"].items():
        [cpu] = [b for b in e["backends"] if b["name"] == "CPU"]
        assert cpu["tests_passed"] == cpu["tests_total"] > 0, v
    # the matrix: pp64 at 3 micro-batches x 2 depths and tg8 at 2 depths, every cell of both binaries, one round
    d = steps["bench:decode"]["data"]
    cells = {(r["variant"], r["test"].split(" @ ")[0], r["n_ubatch"], r["depth"]) for r in d["rows"]}
    assert cells >= {(v, "pp64", ub, dep) for v in ("base", VARIANT) for ub in (16, 32, 64) for dep in (0, 512)}
    assert cells >= {(v, "tg8", 512, dep) for v in ("base", VARIANT) for dep in (0, 512)}
    assert d["rounds_run"] == 1 and {v["verdict"] for v in d["vs_base"]} == {"too few samples"}
    # the numbers move: text after a real-text prefix, and the KL divergence over real text (above the floor
    # of same-code pairs, which is llama-perplexity's 16-bit storage of base's log-probabilities: max 5e-05)
    n = steps["numerics"]
    [pair] = n["data"]["pairs"]
    # The KL divergence moves on every machine; whether 16 greedy tokens differ depends on the machine's kernels
    # (they differed on a 2-core AMD EPYC; on an Intel Xeon with AMX, repacking off, the model repeats the prompt
    # in both and the 16 or 64 tokens are bit-identical while the KL divergence moves: mean 0.0065, same top
    # token 94.5 %), so the generation is checked against what the report says, not against a fixed outcome
    assert n["status"] == "ok" and pair["b"] == VARIANT
    assert pair["kld"]["mean"] > 0 and pair["kld"]["max"] > 5e-05 and pair["kld"]["same_top_p"] < 100.0
    [g] = pair["generations"]
    assert g["identical"] in (True, False) and (g["first_diff_char"] is None) == g["identical"]
    assert (g["first_diff_token"] is None) == g["identical"]
    md = (run / "report.md").read_text()
    said = "bit-identical (0 of 1" if g["identical"] else "not bit-identical (1 of 1"
    assert f"`base` vs `{VARIANT}`: {said} generations differ)." in md
    # on a CPU with AMX-INT8, upstream's AMX matrix multiply crashes on Gemma's Q4_K weights (llama.cpp#20824):
    # every variant's runs keep the weights unpacked, and the report says so; elsewhere nothing changes
    amx = "AMX-INT8" in json.loads((run / "env.json").read_text()).get("cpu_isa", {}).get("extensions", [])
    gen_log = (run / g["log_b"]).read_text()
    assert ("--no-repack" in gen_log.splitlines()[0]) == amx
    assert ("with weight repacking off on the CPU backend" in md) == amx
    assert "Model: Gemma 3 270m Q4_K_M" in md and "**Decode on Gemma" not in md  # numerics on it, no decode cells
    assert "Microbatch" in md
