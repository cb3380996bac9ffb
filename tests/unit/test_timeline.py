"""patchkit.results.timeline: the critical path and the lanes' busy time, from results.json's step times (a real
H200 run, examples/h200-fast/fresh, and a run shaped like one with the GPU steps beside each other)."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.results import timeline

FRESH = Path(__file__).resolve().parents[2] / "examples" / "h200-fast" / "fresh" / "results.json"
T0 = "2026-12-02T10:00:00.000+00:00"


def _at(s: float) -> str:
    return f"2026-12-02T10:{int(s) // 60:02d}:{s % 60:06.3f}+00:00"


def _results(steps: dict[str, tuple[str, float, float]]) -> dict:
    return {
        "timeline": {"started": T0, "wall_s": max(e for _, _, e in steps.values())},
        "steps": {
            n: {"resource": r, "started": _at(a), "finished": _at(b), "seconds": b - a}
            for n, (r, a, b) in steps.items()
        },
    }


def test_the_committed_h200_run_one_step_after_the_other():
    s = timeline.summary(json.loads(FRESH.read_text()))
    assert [p["step"] for p in s["critical_path"]] == [
        "build:cuda-90",
        "test:flash_attn",
        "bench:kernel",
        "bench:path",
        "bench:decode",
        "numerics",
    ]
    assert s["wall_s"] == 861.1 and s["finished"] is True


def test_a_gpu_step_held_through_the_timing_waited_for_it():
    r = _results(
        {
            "build:cuda-90": ("cpu", 0, 100),
            "check:cuda-89": ("cpu", 0, 250),  # held through the timing, at low priority beside the builds
            "test:flash_attn": ("gpu", 50, 300),  # beside the builds, held through kernel and decode
            "bench:kernel": ("gpu", 100, 200),
            "bench:decode": ("gpu", 200, 220),
            "bench:path": ("gpu", 220, 260),  # after the kernel timing it reads
        }
    )
    s = timeline.summary(r)
    assert [p["step"] for p in s["critical_path"]] == [
        "build:cuda-90",
        "bench:kernel",
        "bench:decode",
        "test:flash_attn",
    ]
    # GPU busy: the test step from the builds' end less the 120 s it was held, plus the rest
    assert s["busy_s"]["gpu"] == (300 - 220) + 100 + 20 + 40
    assert timeline.png(r)[:8] == b"\x89PNG\r\n\x1a\n"
