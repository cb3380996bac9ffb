"""scripts/manual_loop.py: the warm loop's time to the kernel verdict against the manual loop's (issue 37)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "manual_loop.py"


def _run(*args: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_the_ratio_is_the_verdict_time_over_the_manual_total(tmp_path):
    log = tmp_path / "manual-loop.log"
    log.write_text("+ cmake --build ...\nmanual loop: build_s 44.5 perf_s 15.5 total_s 60.0\n")
    res = tmp_path / "results.json"
    res.write_text(json.dumps({"timeline": {"to_kernel_verdict_s": 90.0, "to_report_s": 170.2}}))
    r = _run(log, res)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "manual loop 60.0 s (build 44.5 s, perf 15.5 s); patchkit warm: kernel verdict 90.0 s = 1.50x the manual "
        "loop, report 170.2 s"
    )


def test_a_run_without_the_verdict_time_is_refused(tmp_path):
    log = tmp_path / "manual-loop.log"
    log.write_text("manual loop: build_s 1 perf_s 1 total_s 2\n")
    r = _run(log, ROOT / "examples" / "h200-readme" / "warm" / "results.json")  # made before the live report
    assert r.returncode == 2 and "no timeline.to_kernel_verdict_s" in r.stderr
