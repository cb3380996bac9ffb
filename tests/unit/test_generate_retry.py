"""A generation whose output llama.cpp's logger cut short at exit is run again, never compared:
run._generate replayed over real recorded logs (tests/fixtures/cpu/gen_*.log)."""

from __future__ import annotations

import shutil
from pathlib import Path

from patchkit.measure import numerics as run
from patchkit.results import Bundle

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


def _bundle(tmp_path: Path, logs: dict[str, str]) -> Bundle:
    (tmp_path / "raw").mkdir()
    for name, fixture in logs.items():
        shutil.copy(FIX / fixture, tmp_path / "raw" / f"{name}.log")
    b = Bundle(path=tmp_path, data={"steps": {}})
    b.replay = True
    return b


def _gen(b: Bundle, logs: list[str]):
    bins = run.Bins(variant="base", dir=Path("/nonexistent"))
    return run._generate(b, bins, Path("m.gguf"), Path("p.txt"), 64, 592, "q4_0", "q4_0", "d0-p1", 60, logs)


def test_cut_short_run_is_run_again_and_both_logs_kept(tmp_path):
    b = _bundle(tmp_path, {"gen-d0-p1-base": "gen_cut_short.log", "gen-d0-p1-base-try2": "gen_finished.log"})
    logs: list[str] = []
    text, why, log, _ = _gen(b, logs)
    assert why == "" and text and "]]]]]]]]" in text
    assert logs == ["raw/gen-d0-p1-base.log", "raw/gen-d0-p1-base-try2.log"] and log == "raw/gen-d0-p1-base-try2.log"


def test_a_finished_first_run_is_not_repeated(tmp_path):
    b = _bundle(tmp_path, {"gen-d0-p1-base": "gen_finished.log", "gen-d0-p1-base-try2": "gen_cut_short.log"})
    logs: list[str] = []
    text, why, _, _ = _gen(b, logs)
    assert why == "" and text and logs == ["raw/gen-d0-p1-base.log"]


def test_cut_short_every_time_is_a_reason_not_a_difference(tmp_path):
    names = ["gen-d0-p1-base"] + [f"gen-d0-p1-base-try{i}" for i in range(2, run.ATTEMPTS + 1)]
    b = _bundle(tmp_path, dict.fromkeys(names, "gen_cut_short.log"))
    logs: list[str] = []
    text, why, _, _ = _gen(b, logs)
    assert (
        text is None and "cut short in 3 runs (no closing common_perf_print lines" in why and len(logs) == run.ATTEMPTS
    )
