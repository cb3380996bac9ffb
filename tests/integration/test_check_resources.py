"""The compile check's resource report against real nvcc: the default recipe's +0001 (llama.cpp
0c1e57098) configured by CMake for sm_89 with the check's flags (patchkit.measure.resources adds
--ptxas-options=-v to CMAKE_CUDA_FLAGS), one 8-column FA MMA instance compiled by Ninja as the check
does, and the Ninja log parsed as the check step parses its logs. About two minutes on 2 cores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit.measure import occupancy_formula as occ
from patchkit.measure import resources
from patchkit.recipe import load_recipe

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: compiling CUDA needs the CUDA toolkit",
)

UNIT = "ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_8.cu"
KERNEL = "flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>"  # as ncu names it


@pytest.fixture(scope="module")
def applied(work, base, cli):
    cli("apply", "--work", str(work.root))
    return work


def test_sm89_check_reports_registers_of_the_8_column_kernel(applied, tmp_path):
    recipe = load_recipe(None)
    tree = applied.variants(recipe.name) / "+0001"
    assert (tree / UNIT).is_file()
    opts = build_mod.options_from(recipe, backend="cuda", archs=("89",))
    tc = build_mod.toolchain(opts)
    flags = resources.ptxas_cmake_options(tc.cmake_args, opts.cmake_options)
    opts = build_mod.BuildOptions(**{**opts.__dict__, "cmake_options": flags, "jobs": 2})
    bdir = tmp_path / "build"
    build_mod.configure(tree, bdir, opts, tc, tmp_path / "check-configure-cuda-89.log")
    objs = build_mod.object_targets(bdir, [UNIT], tc.env)
    log = tmp_path / "check-cuda-89-+0001.log"
    build_mod.run_ninja(bdir, list(objs.values()), opts, tc, log, "check +0001 sm_89")
    data = resources.from_logs(sorted(tmp_path.glob("check-*.log")), rel=lambda p: p.name)
    assert data["resource_errors"] == []
    rows = data["kernels"]
    assert rows and all(r["arch"] == "sm_89" for r in rows)
    assert {r["unit"] for r in rows} == {"template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_8.cu"}
    row = resources.lookup(rows, KERNEL, "89", variant="+0001")
    assert row is not None, sorted(r["display"] for r in rows)[:5]
    assert row["display"].startswith("flash_attn_ext_f16<256, 256, 1, 8, false, false, false>")
    # the recorded H200 machine's nvcc gave the same kernel 198 registers for sm_89 (fixture
    # tests/fixtures/occupancy/ptxas/ptxas-sm89-fattn-mma-f16-instance-ncols1_1-ncols2_8-+0001.log)
    assert 128 < row["registers"] <= 255
    assert row["smem"] == 0 and row["spill_stores"] == 0
    # and it feeds the prediction: 128 threads and 65,680 bytes of dynamic shared memory measured on the H200
    launch = occ.Launch(registers=233, threads=128, smem_static=0, smem_dynamic=65680, grid=264)
    got = occ.predict(launch, row["registers"], row["smem"], occ.gpu("RTX 4070"))
    assert got.blocks_per_sm == 1 and got.limiter == "shared memory"
