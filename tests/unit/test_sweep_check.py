"""patchkit.sweep.check: which translation units a row needs (the real header and template instances
of llama.cpp 0c1e57098, tests/fixtures/sweep), and the first error of a failed compile, from real
Ninja + nvcc runs here (a ptxas shared-memory overflow, a static_assert in an included header)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit import proc
from patchkit.parsers.compiler import block_error, failed_objects
from patchkit.sweep.check import row_units
from patchkit.sweep.spec import SweepError, parse_sweep

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"
CUDA = "ggml/src/ggml-cuda"
INSTANCES = {"macro": "DECL_FATTN_MMA_F16_CASE", "key": {"ncols": "ncols1 * ncols2"}}


def spec(**changes):
    base = {
        "file": f"{CUDA}/fattn-mma-f16.cuh",
        "function": "ggml_cuda_fattn_mma_get_config_ampere",
        "row": {"DKQ": 256, "DV": 256, "ncols": 8},
        "params": {"nthreads": [64]},
        "start": "+0001",
        "instances": INSTANCES,
    }
    return parse_sweep({k: v for k, v in {**base, **changes}.items() if v is not None}, "s.toml: sweep")


@pytest.fixture
def tree(tmp_path) -> Path:
    """The header, its six recorded instance units and a dispatcher that includes it (fattn.cu's role)."""
    d = tmp_path / "tree" / CUDA
    (d / "template-instances").mkdir(parents=True)
    shutil.copy(FIX / "fattn-mma-f16.cuh", d)
    for f in (FIX / "template-instances").glob("*.cu"):
        shutil.copy(f, d / "template-instances")
    (d / "fattn.cu").write_text('#include "common.cuh"\n#include "fattn-mma-f16.cuh"\n')
    (d / "other.cu").write_text('#include "common.cuh"\n')
    return tmp_path / "tree"


def header() -> str:
    return (FIX / "fattn-mma-f16.cuh").read_text()


def test_the_8_column_row_needs_its_instances_and_the_dispatcher(tree):
    assert row_units(tree, spec(), header()) == [
        f"{CUDA}/fattn.cu",
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_8.cu",
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_2-ncols2_4.cu",
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_4-ncols2_2.cu",
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_1.cu",
    ]
    # the 16-column row of head size 256: ncols1_16-ncols2_1 (ncols1_1-ncols2_16 has only 576/512)
    s16 = spec(row={"DKQ": 256, "DV": 256, "ncols": 16})
    assert row_units(tree, s16, header()) == [
        f"{CUDA}/fattn.cu",
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_16-ncols2_1.cu",
    ]


def test_one_unit_is_the_row_instance_with_fewest_declarations(tree):
    assert row_units(tree, spec(units="one"), header()) == [
        f"{CUDA}/template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_1.cu"
    ]


def test_without_an_instance_rule_every_includer_is_compiled(tree):
    units = row_units(tree, spec(instances=None), header())
    assert len(units) == 7 and f"{CUDA}/other.cu" not in units
    with pytest.raises(SweepError, match=r"sweep.units: 'one' needs \[sweep.instances\]"):
        row_units(tree, spec(instances=None, units="one"), header())


def test_instance_rule_errors_name_the_key(tree):
    bad = {"macro": "DECL_FATTN_MMA_F16_CASE", "key": {"ncols": "ncols1 * ncols3"}}
    with pytest.raises(SweepError, match=r"^s.toml: sweep.instances.key.ncols: 'ncols3' is not a parameter"):
        row_units(tree, spec(instances=bad), header())
    with pytest.raises(SweepError, match=r"^s.toml: sweep.instances.macro: no #define of 'DECL_X'"):
        row_units(tree, spec(instances={"macro": "DECL_X"}), header())
    with pytest.raises(SweepError, match=r"^s.toml: sweep.units: nope.cu: no such file"):
        row_units(tree, spec(units=["nope.cu"]), header())


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ninja") is None, reason="needs nvcc")


def _ninja(tmp_path: Path, sources: dict[str, str]) -> str:
    """Ninja compiling each .cu with nvcc for sm_89, -k 0: its output."""
    rules = ["rule nvcc", "  command = nvcc -arch=sm_89 -c $in -o $out"]
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
        if name.endswith(".cu"):
            rules.append(f"build {name}.o: nvcc {tmp_path / name}")
    (tmp_path / "build.ninja").write_text("\n".join(rules) + "\n")
    objs = [f"{n}.o" for n in sources if n.endswith(".cu")]
    done = proc.run(["ninja", "-C", str(tmp_path), "-k", "0", *objs], log=tmp_path / "ninja.log", check=False)
    assert done.returncode == 1
    return done.stdout


@needs_nvcc
def test_ptxas_and_static_assert_errors_from_a_real_build(tmp_path):
    out = _ninja(
        tmp_path,
        {
            "big.cu": "__global__ void k(float * o) {\n    __shared__ float t[40000];\n    t[threadIdx.x] = 1;\n"
            "    __syncthreads();\n    o[threadIdx.x] = t[threadIdx.x + 1];\n}\n",
            "inc/cfg.cuh": 'static_assert(128 % 48 == 0, "bad nbatch_fa");\n',
            "sub/use.cu": '#include "../inc/cfg.cuh"\n__global__ void k() {}\n',
            "ok.cu": "__global__ void k() {}\n",
        },
    )
    failed = failed_objects(out, str(tmp_path))
    assert failed == {
        "big.cu.o": "ptxas error: Entry function '_Z1kPf' uses too much shared data (0x27100 bytes, 0xc000 max)",
        "sub/use.cu.o": 'inc/cfg.cuh:1: static assertion failed with "bad nbatch_fa"',
    }


def test_an_unknown_failure_gives_its_first_error_line():
    block = "x.o\n/usr/bin/cc -c x.c\nsomething went wrong\nfatal: Error 9 happened\n"
    assert block_error(block, "/t") == "fatal: Error 9 happened"
