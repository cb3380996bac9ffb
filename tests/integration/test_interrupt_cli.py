"""The real CLI stopped while real nvcc compiles llama.cpp's fattn.cu (issue 29): `patchkit build --check
--arch 89` on the real tree, signalled once cicc or ptxas runs under Ninja. Every compiler process is
gone at once and the object never appears; SIGTERM ends patchkit with 143. On the old code nvcc ran on
after patchkit was gone (Ninja starts each compile in a process group of its own)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.test_interrupt import _descendants, _stat, _wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: the CUDA compile check needs the CUDA toolkit",
)
@pytest.mark.parametrize("how", ["SIGTERM", "kill-9-group"])
def test_the_cli_stopped_during_a_real_nvcc_compile_leaves_no_compiler(base, work, tmp_path, how):
    obj = work.builds("seed-fattn", "check-cuda-89") / "build/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o"
    obj.unlink(missing_ok=True)  # the check compiles fattn.cu again (a minute or more here)
    out = (tmp_path / "out").open("w")
    cmd = [sys.executable, "-m", "patchkit", "build", "--arch", "89", "--check", "-j", "1", "--work", str(work.root)]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    seen: dict[int, str] = {}
    try:
        _wait_for(lambda: {"cicc", "ptxas"} & set(_descendants(p.pid).values()), 900, p)
        seen = {x: c for x, c in _descendants(p.pid).items() if c in ("nvcc", "cicc", "ptxas", "sh", "ninja")}
        t0 = time.monotonic()
        if how == "SIGTERM":
            os.kill(p.pid, signal.SIGTERM)  # `kill PID`: patchkit alone
            assert p.wait(timeout=30) == 143
            assert time.monotonic() - t0 < 10
            text = (tmp_path / "out").read_text()
            assert "patchkit: interrupted (SIGTERM); rerun the same command to resume" in text
        else:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        while time.monotonic() - t0 < 5 and any(_stat(x) for x in seen):
            time.sleep(0.05)
        assert {x: c for x, c in seen.items() if _stat(x)} == {}
        time.sleep(20)
        assert not obj.exists()
    finally:
        for x in seen:
            if _stat(x):
                os.kill(x, signal.SIGKILL)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
