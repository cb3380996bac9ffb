"""Issue 34: CPU runs described as CPU runs. The instruction set a CPU build compiled ggml-cpu for, read
from a real CMake/Ninja build folder (a small project laid out as ggml's: target ggml-cpu, built with
-march=native as GGML_NATIVE does) and resolved with the real compiler; the CPU features llama.cpp's
system_info prints (a real CPU llama-completion log); the hardware section of the committed real CPU run
without the CUDA toolkit line or GPU lane words; no GPU clock note on a CPU run; Ninja's step count said
once (its first total is not its last)."""

from __future__ import annotations

import contextlib
import io
import json
import platform
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchkit import build, cli, proc
from patchkit.measure.clocks import Clocks
from patchkit.measure.env import build_isa
from patchkit.measure.hooks import Around
from patchkit.parsers.devices import cpu_features
from patchkit.results import Bundle

ROOT = Path(__file__).resolve().parents[2]
CPU_RUN = ROOT / "tests" / "fixtures" / "runs" / "cpu-measure-same-code"
X86 = platform.machine() in ("x86_64", "AMD64")


def _project(tmp_path: Path, flags: str) -> Path:
    """A CMake project with ggml's target name and folder, configured with Ninja; returns its build folder."""
    src = tmp_path / "src"
    (src / "ggml-cpu").mkdir(parents=True)
    (src / "ggml-cpu" / "ops.c").write_text("int ops(int x) { return x * 2; }\n")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(toy C)\n"
        f"add_library(ggml-cpu STATIC ggml-cpu/ops.c)\ntarget_compile_options(ggml-cpu PRIVATE {flags})\n"
    )
    bdir = tmp_path / "build"
    proc.run(["cmake", "-S", str(src), "-B", str(bdir), "-G", "Ninja"], echo=False)
    return bdir


@pytest.mark.skipif(not X86, reason="the x86 instruction-set names")
def test_a_native_build_names_the_instruction_set_the_compiler_resolves(tmp_path):
    isa = build_isa(_project(tmp_path, "-march=native"))
    assert isa is not None and isa["flags"] == "-march=native"
    help_text = subprocess.run(["cc", "-march=native", "-Q", "--help=target"], capture_output=True, text=True).stdout
    march = re.search(r"^\s+-march=\s+(\S+)", help_text, re.M).group(1)
    assert isa["march"] == march and march != "native"
    avx2 = bool(re.search(r"^\s+-mavx2\s+\[enabled\]", help_text, re.M))
    assert ("AVX2" in isa["extensions"]) == avx2 and "SSE4.2" in isa["extensions"]


def test_a_build_with_explicit_flags_names_those(tmp_path):
    isa = build_isa(_project(tmp_path, "-mavx2 -mfma -mf16c"))
    assert isa == {
        "flags": "-mavx2 -mfma -mf16c",
        "from": "build.ninja: ggml-cpu's FLAGS",
        "extensions": ["AVX2", "FMA", "F16C"],
    }
    assert build_isa(tmp_path / "nowhere") is None


def test_the_cpu_features_llama_cpp_prints():
    log = (ROOT / "tests" / "fixtures" / "cpu" / "gen_finished.log").read_text()
    assert cpu_features(log) == ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE", "OPENMP", "REPACK")
    h200 = (ROOT / "examples" / "h200" / "raw" / "gen-d0-p1-base.log").read_text()  # CUDA's section first
    assert cpu_features(h200)[:3] == ("SSE3", "SSSE3", "AVX") and "ARCHS" not in cpu_features(h200)
    assert cpu_features("no system info\n") == ()


def _report(run: Path, out: Path) -> str:
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = cli.main(["report", str(run), "-o", str(out)])
    assert rc == 0, e.getvalue()
    return out.read_text()


def test_the_cpu_run_s_hardware_section_is_a_cpu_s(tmp_path):
    """Was: "CUDA 13.0" in the summary line and a `CUDA | nvcc 13.0` row for a -DGGML_CUDA=OFF build, and
    "GPU lane" in the wall-time line."""
    run = tmp_path / "run"
    shutil.copytree(CPU_RUN, run)
    text = _report(run, tmp_path / "r.md")
    assert "CUDA 13.0" not in text and "| CUDA |" not in text and "GPU lane" not in text
    assert "CPU lane 2 s, timing lane 48 s past the builds; builds and compile checks beside the timing steps" in text
    # the instruction set recorded from the build folder, and the features a numerics log printed
    env = json.loads((run / "env.json").read_text())
    env["cpu_isa"] = build_isa(_project(tmp_path, "-mavx2 -mfma"))
    (run / "env.json").write_text(json.dumps(env))
    shutil.copy(ROOT / "tests" / "fixtures" / "cpu" / "gen_finished.log", run / "raw" / "gen-d0-p0-base.log")
    text = _report(run, tmp_path / "r2.md")
    assert "| CPU instruction set of the build | `-mavx2 -mfma`: AVX2, FMA |" in text
    assert (
        "| CPU features llama.cpp reports | SSE3, SSSE3, AVX, AVX2, F16C, FMA, BMI2, LLAMAFILE, OPENMP, REPACK " in text
    )


def test_a_cpu_run_samples_no_gpu_clocks_and_says_nothing_of_them(tmp_path, capsys):
    b = Bundle.create(tmp_path / "runs", recipe="t", run_id="r", meta={"backend": "cpu"})
    c = Clocks(b, "decode")
    assert c.available() is False and c.sample("r1-base-before") is None
    assert c.data() is None and c.logs == []
    around = Around(b, "decode")  # every hook of the table (clocks, power): none applies on a CPU run
    around.enter("r1-base")
    around.exit("r1-base", 1, "base", tokens=128)
    assert around.data() == {} and around.logs == [] and list(b.path.joinpath("raw").glob("*")) == []
    assert "GPU" not in capsys.readouterr().out


def test_ninja_s_step_count_is_said_once(tmp_path, capsys):
    """Ninja's first total is not its last: an edited CMakeLists.txt makes it re-run CMake as [1/1], then
    build [1/N]. Was: "[build t] 1 steps: Ninja" then "(N steps)"."""
    bdir = _project(tmp_path, "-O1")
    opts, tc = SimpleNamespace(jobs=1), SimpleNamespace(env=None)
    build.run_ninja(bdir, ["ggml-cpu"], opts, tc, tmp_path / "b1.log", "build t")
    cml = tmp_path / "src" / "CMakeLists.txt"
    cml.write_text(cml.read_text() + "# edited\n")
    (tmp_path / "src" / "ggml-cpu" / "ops.c").write_text("int ops(int x) { return x * 3; }\n")
    capsys.readouterr()
    done = build.run_ninja(bdir, ["ggml-cpu"], opts, tc, tmp_path / "b2.log", "build t")
    totals = [int(m.group(1)) for m in re.finditer(r"^\[\d+/(\d+)\]", done.stdout, re.M)]
    assert len(set(totals)) > 1, done.stdout  # the first total was not the last
    err = capsys.readouterr().err
    assert "[build t] steps counted as they run: Ninja" in err
    assert not re.search(r"^\[build t\] \d+ steps", err, re.M), err
