"""patchkit.measure.resources: the compile check's CMake flag, and its logs read into per-kernel rows
(a Ninja log built from a recorded ptxas report of the H200 machine's nvcc)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit.measure import resources

PTXAS = Path(__file__).resolve().parents[1] / "fixtures" / "occupancy" / "ptxas"
UNIT = "fattn-mma-f16-instance-ncols1_1-ncols2_8"


def test_flag_added_keeping_the_value_cmake_would_use():
    assert resources.ptxas_cmake_options((), ()) == ("-DCMAKE_CUDA_FLAGS=--ptxas-options=-v",)
    tc = ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_FLAGS=-I/w/include")
    assert resources.ptxas_cmake_options(tc, ("-DGGML_X=1",)) == (
        "-DGGML_X=1",
        "-DCMAKE_CUDA_FLAGS=-I/w/include --ptxas-options=-v",
    )
    # the user's value overrides the toolchain's (it comes last on CMake's command line): keep that one
    user = ("-DCMAKE_CUDA_FLAGS:STRING=-lineinfo",)
    assert resources.ptxas_cmake_options(tc, user)[-1] == "-DCMAKE_CUDA_FLAGS=-lineinfo --ptxas-options=-v"
    done = resources.ptxas_cmake_options((), ("-DCMAKE_CUDA_FLAGS=--ptxas-options=-v",))
    assert done == ("-DCMAKE_CUDA_FLAGS=--ptxas-options=-v",)


def test_names_for_display_and_matching_ncu():
    d = "void flash_attn_ext_f16<256, 256, 1, 8, false, false, false>(char const*, float2*, int)"
    assert resources.short_name(d) == "flash_attn_ext_f16<256, 256, 1, 8, false, false, false>"
    ncu = "void flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>(const char *, float2 *, int)"
    assert resources.match_key(d) == resources.match_key(ncu)
    assert resources.match_key(d) != resources.match_key(ncu.replace("8, 0", "16, 0"))


def _ninja_log(tmp_path: Path) -> Path:
    report = (PTXAS / f"ptxas-sm89-{UNIT}-+0001.log").read_text()
    status = f"[1/2] Building CUDA object ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/{UNIT}.cu.o\n"
    other = (PTXAS / "ptxas-sm89-convert-+0001.log").read_text()
    status2 = "[2/2] Building CUDA object ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/convert.cu.o\n"
    log = tmp_path / "check-cuda-89-+0001.log"
    log.write_text("$ ninja -C build -k 0 ...\n" + status + report + status2 + other)
    return log


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) is not installed")
def test_from_logs_rows_per_kernel_with_unit_and_display(tmp_path):
    log = _ninja_log(tmp_path)
    (tmp_path / "check-configure-cuda-89.log").write_text("-- Configuring done\n")
    data = resources.from_logs(sorted(tmp_path.glob("check-*.log")), rel=lambda p: p.name)
    assert data["resource_errors"] == []
    rows = data["kernels"]
    units = {r["unit"] for r in rows}
    assert units == {f"template-instances/{UNIT}.cu", "convert.cu"}
    row = resources.lookup(rows, "void flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>(const char *)", "89")
    assert row is not None
    assert (row["registers"], row["smem"], row["arch"], row["log"]) == (198, 0, "sm_89", log.name)
    assert row["display"] == "flash_attn_ext_f16<256, 256, 1, 8, false, false, false>"
    assert row["unit"] == f"template-instances/{UNIT}.cu"
    assert {r["variant"] for r in rows} == {"+0001"}
    assert resources.lookup(rows, row["name"], "sm_89", variant="+0001+0002") is None
    assert resources.lookup(rows, "flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>", "90") is None
    conv = [r for r in rows if r["unit"] == "convert.cu"]
    assert conv and all(not r["display"].startswith("flash_attn") for r in conv)


def test_a_cut_log_is_an_error_line_not_rows(tmp_path):
    log = _ninja_log(tmp_path)
    text = log.read_text()
    log.write_text(text[: text.rindex("ptxas info    : Used")])
    data = resources.from_logs([log], rel=lambda p: p.name)
    assert data["kernels"] == []
    (e,) = data["resource_errors"]
    assert e.startswith(f"{log.name}:") and "no 'Used' line" in e
