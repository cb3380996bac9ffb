"""The CPU lane held while kernels are timed, for real: the default recipe's base and +0001 on the CPU
backend with the sm_89 compile check of +0001 (nvcc compiling fattn.cu) on the CPU lane; the kernel
timing and decode steps stop that compile while they time and let it go on after. The tests, a GPU step
that does not time kernels, run on a thread of their own from the start and are held the same way."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.test_cli_cpu import small_measure


def _span(step: dict) -> tuple[float, float]:
    t = datetime.fromisoformat(step["started"]).timestamp()
    return t, t + step["seconds"]


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: the CUDA compile check needs the CUDA toolkit",
)
def test_compile_check_is_held_while_kernels_are_timed(cpu_build, work, cli):
    obj = work.builds("seed-fattn", "check-cuda-89") / "build/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o"
    obj.unlink(missing_ok=True)  # the check compiles fattn.cu again, for tens of seconds
    run = work.runs("seed-fattn") / "ci-hold"
    shutil.rmtree(run, ignore_errors=True)
    r = cli(
        "run",
        "--backend",
        "cpu",
        "--work",
        str(work.root),
        "-j",
        "2",
        "--run",
        "ci-hold",
        "--variant",
        "base",
        "--variant",
        "+0001",
        "--check-arch",
        "89",
        "--measure-same-code",
        *small_measure(rounds=2),
        "--skip",
        "numerics",
        "--skip",
        "bench:decode",
    )
    assert "[bench:kernel] CPU lane held while it timed: " in r.stdout
    assert "[bench:kernel] other GPU steps held while it timed: " in r.stdout
    steps = json.loads((run / "results.json").read_text())["steps"]
    check, kernel, tests = steps["check:cuda-89"], steps["bench:kernel"], steps["test:flash_attn"]
    assert check["status"] == "ok" and kernel["status"] == "ok" and tests["status"] == "ok"
    # +0001's own change; base's items, where a local patch touches CUDA sources (0009, 0011 listed), are the units
    # that patch reaches, compiled once at base (unitcheck.check)
    assert [i["source"] for i in check["data"]["items"] if i["variant"] == "+0001"] == ["ggml/src/ggml-cuda/fattn.cu"]
    (c0, c1), (k0, k1), (t0, t1) = _span(check), _span(kernel), _span(tests)
    assert c0 < k0 and k1 < c1  # the check began first, and ended after the timing (held through it)
    assert t0 < k0 and k0 < t1  # the tests began first (beside the builds) and were still running
