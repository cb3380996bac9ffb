"""The compile check's resource report against real nvcc: the default recipe's series end +0001+0002
(llama.cpp 0c1e57098) compile-checked for sm_89 by the session's `patchkit build --arch 89 --check --variant
+0001+0002` (conftest's sm89_check) with the flag the run's check step adds (patchkit.measure.resources adds
--ptxas-options=-v to CMAKE_CUDA_FLAGS): it compiles fattn.cu and the 8-column FA MMA instances (their head
size 256 parts where the recipe lists the local patch 0009). Its Ninja log is parsed as the check step parses
its logs (`resources.from_logs`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit.measure import occupancy_formula as occ
from patchkit.measure import resources
from tests.integration.conftest import mma_instance

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: compiling CUDA needs the CUDA toolkit",
)

KERNEL = "flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>"  # as ncu names it


def test_sm89_check_reports_registers_of_the_8_column_kernel(sm89_check, work):
    _, logs = sm89_check
    # the unit that instantiates the kernel in the variant's tree, as the log names it (under ggml-cuda/)
    unit = mma_instance(work.variants("seed-fattn") / "+0001+0002", 256, 256, 1, 8).split("ggml-cuda/", 1)[1]
    data = resources.from_logs([logs / "check-cuda-89-+0001+0002.log"], rel=lambda p: p.name)
    assert data["resource_errors"] == []
    assert data["kernels"] and all(r["arch"] == "sm_89" for r in data["kernels"])
    assert unit in {r["unit"] for r in data["kernels"]}  # Ninja compiled it for +0001+0002, ptxas reported it
    rows = [r for r in data["kernels"] if r["unit"] == unit]
    row = resources.lookup(rows, KERNEL, "89", variant="+0001+0002")
    assert row is not None, sorted(r["display"] for r in rows)[:5]
    assert row["display"].startswith("flash_attn_ext_f16<256, 256, 1, 8, false, false, false>")
    # the recorded H200 machine's nvcc gave the same kernel 194 registers for sm_89 (fixture
    # tests/fixtures/occupancy/ptxas/ptxas-sm89-fattn-mma-f16-instance-ncols1_1-ncols2_8-+0001+0002.log)
    assert 128 < row["registers"] <= 255
    assert row["smem"] == 0 and row["spill_stores"] == 0
    # and it feeds the prediction: 64 threads and 32,848 bytes of dynamic shared memory measured on the H200
    # (+0001 had 1 block per SM predicted on the RTX 4070, shared memory; test_occupancy's recorded reports)
    launch = occ.Launch(registers=233, threads=64, smem_static=0, smem_dynamic=32848, grid=528)
    got = occ.predict(launch, row["registers"], row["smem"], occ.gpu("RTX 4070"))
    assert got.blocks_per_sm == 3 and got.limiter == "shared memory"
