"""The second recipe (recipes/pool1d-cuda.toml) end to end on the CPU (issue 28): a real upstream change
that ADDS CUDA files (pool1d.cu, pool1d.cuh: ggml's CMake lists *.cu with file(GLOB) at configure time)
on the commit llama-cpp-python 0.3.35 vendors.

One `patchkit run --backend cpu --check-arch 89` in a fresh work folder (the sdist fetched once into the
session's shared cache, from PyPI, then hard-linked): fetch (sdist route, verified upstream commit),
apply, both variants built in one reused CPU build folder with no hand step (configured again for
+0001: its file list differs), test-backend-ops -o POOL_1D on base and +0001, and the sm_89 compile
check with real nvcc, where pool1d.cu is compiled (ptxas names its kernel) and no unit is failed or
left out. The recipe builds test-backend-ops only: decode and numerics are "not run", exit 0.
Measured on the shared 2-core machine, 2026-12-03, with other builds beside it (load 3-4): 582 s in
all; CPU builds base 394 s (247 steps), +0001 161 s (191 steps: the configure bakes the tree's commit into
llama's and ggml-base's compile definitions), sm_89 check 40 s.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from patchkit import source
from patchkit.recipe import load_recipe
from tests.integration.conftest import copy_cache

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "pool1d-cuda.toml"
V35 = "4df29be4f4c3673f428170fda944a5b19f743bb8"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("nvcc")),
        reason="needs cmake, ninja, nvcc",
    ),
]


@pytest.fixture(scope="module")
def pool1d_run(work, cli, tmp_path_factory):
    """The recipe's whole run on the CPU, fresh builds every time (its own work folder)."""
    source.download_sdist(load_recipe(str(RECIPE)).base.sdist, work)  # the one real fetch (cached after)
    fresh = copy_cache(work, tmp_path_factory.mktemp("pool1d") / "work")
    r = cli(
        "run", "-r", str(RECIPE), "--backend", "cpu", "--check-arch", "89", "-j", "2", "--test-jobs", "2",
        "--work", str(fresh.root), "--label", "ci", check=False,
    )  # fmt: skip
    [run] = list(fresh.runs("pool1d-cuda").glob("*-ci"))
    return r, fresh, run, json.loads((run / "results.json").read_text())["steps"]


def test_the_base_is_the_vendored_upstream_commit(pool1d_run):
    r, fresh, _, _ = pool1d_run
    [meta] = (fresh.cache / "bases").glob("sdist-llama-cpp-python-0.3.35-*.json")  # keyed by what made it
    info = json.loads(meta.read_text())
    assert info["commit"] == V35 and info["upstream_verified"] is True, info
    assert f"base {info['key']}: {V35} (upstream commit, verified)" in r.stdout


def test_its_variants_build_in_one_reused_folder_with_no_hand_step(pool1d_run):
    r, fresh, run, steps = pool1d_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    root = fresh.builds("pool1d-cuda", "cpu")
    b = re.search(r"^base: built in \d+ s \((\d+) steps\)", r.stdout, re.M)
    m = re.search(r"^\+0001: built in \d+ s \((\d+) steps\)", r.stdout, re.M)
    assert b and m, r.stdout[-3000:]
    # the one build folder was configured again for +0001 (pool1d.cu/.cuh added), by patchkit itself
    assert f"{root / 'build'}: configure again: files were added, removed or renamed" in r.stdout
    for v in ("base", "+0001"):  # each variant's binaries snapshotted from the one build folder
        res = json.loads((root / "bin" / v / "manifest.json").read_text())["result"]
        assert res["bin_dir"] == f"builds/pool1d-cuda/cpu/bin/{v}" and res["reused"] is False, res
    assert (run / "raw" / "configure-cpu-+0001.log").is_file()  # the configure patchkit ran for +0001
    # +0001 reused base's objects, though not many: the configure bakes the tree's commit into the compile
    # definitions of llama and ggml-base (LLAMA_COMMIT, GGML_COMMIT), so those are compiled again (191 of 247)
    assert 0 < int(m.group(1)) < int(b.group(1))
    assert steps["build:cpu"]["status"] == "ok", steps["build:cpu"]


def test_the_compile_check_compiles_the_added_unit_and_fails_none(pool1d_run):
    _, fresh, _, steps = pool1d_run
    check = steps["check:cuda-89"]
    assert check["status"] == "ok", check
    items = check["data"]["items"]
    assert {i["source"] for i in items} == {"ggml/src/ggml-cuda/ggml-cuda.cu", "ggml/src/ggml-cuda/pool1d.cu"}
    assert all(i["ok"] and not i["error"] and not i["cleared"] and i["variant"] == "+0001" for i in items), items
    # nvcc really compiled the new file for sm_89: ptxas reports its kernel
    kernels = {(k["unit"], k["display"], k["arch"]) for k in check["data"]["kernels"]}
    assert ("pool1d.cu", "pool1d_nchw_kernel", "sm_89") in kernels, sorted(kernels)[:20]
    ninja = (fresh.builds("pool1d-cuda", "check-cuda-89") / "build" / "build.ninja").read_text()
    assert "ggml-cuda.dir/pool1d.cu.o" in ninja  # the configured CUDA build lists the added unit


def test_the_suite_runs_and_decode_and_numerics_are_not_run(pool1d_run):
    r, _, run, steps = pool1d_run
    test = steps["test:pool1d"]
    assert test["status"] == "ok", test
    for name in ("bench:decode", "numerics"):
        assert steps[name]["status"] == "not_run" and steps[name]["reason"], steps[name]
        assert not steps[name]["logs"], steps[name]
    for name in ("bench:kernel", "bench:path", "bench:occupancy"):  # no [bench.kernel]: no timing on defaults
        assert steps[name]["status"] == "not_run", steps[name]
    assert steps["bench:kernel"]["reason"] == "the recipe has no [bench.kernel]"
    assert "not ok:" not in r.stdout
    md = (run / "report.md").read_text()
    assert re.search(r"`bench:decode` on CPU[^:]*: not run: ", md.split("Not tested", 1)[1])
