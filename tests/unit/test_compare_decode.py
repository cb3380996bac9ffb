"""scripts/compare_decode.py: two runs' decode verdicts compared per variant and depth (issue 27)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compare_decode.py"


def _run_folder(tmp: Path, name: str, floor: float, rows: list[tuple[str, int, float, float, float, str]]) -> Path:
    d = tmp / name
    d.mkdir()
    vs = [
        {"variant": v, "depth": dep, "test": f"tg32 @ d{dep}" if dep else "tg32", "ratio": r, "ci_low": lo,
         "ci_high": hi, "verdict": verdict}
        for v, dep, r, lo, hi, verdict in rows
    ]  # fmt: skip
    data = {"noise_floor": floor, "vs_base": vs, "model": {"n_layer": 4, "n_embd": 5120, "weight_type": "q4_0"}}
    (d / "results.json").write_text(json.dumps({"steps": {"bench:decode": {"data": data}}}))
    return d


def _compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True, text=True)


def _line(out: str, variant: str, depth: int) -> str:
    return next(ln for ln in out.splitlines() if ln.split()[:2] == [variant, str(depth)])


def test_same_verdicts_agree_and_a_flip_inside_the_floor_is_within_it(tmp_path):
    a = _run_folder(
        tmp_path,
        "a",
        0.03,
        [("+0001", 0, 0.99, 0.95, 1.04, "ambiguous"), ("+0001", 122880, 1.042, 1.021, 1.08, "ambiguous")],
    )
    b_rows = [("+0001", 0, 0.98, 0.96, 1.00, "ambiguous"), ("+0001", 122880, 1.035, 1.026, 1.05, "faster")]
    b = _run_folder(tmp_path, "b", 0.01, b_rows)
    r = _compare(a, b)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _line(r.stdout, "+0001", 0).endswith("agree")
    assert _line(r.stdout, "+0001", 122880).endswith("within floor")  # |1.042 - 1.035| <= 0.03
    assert "2 of 2 agree or differ within the floor" in r.stdout


def test_a_flip_beyond_the_larger_floor_differs_and_fails(tmp_path):
    a = _run_folder(tmp_path, "a", 0.01, [("+0001+0002", 32768, 0.951, 0.90, 1.05, "ambiguous")])
    b = _run_folder(tmp_path, "b", 0.02, [("+0001+0002", 32768, 0.846, 0.82, 0.87, "slower")])
    r = _compare(a, b)
    assert r.returncode == 1
    assert _line(r.stdout, "+0001+0002", 32768).endswith("DIFFER")
    assert "1 DIFFER" in r.stdout


def test_a_row_in_one_run_only_is_named_and_a_run_without_decode_is_refused(tmp_path):
    a = _run_folder(
        tmp_path, "a", 0.01, [("+0001", 0, 1.0, 0.99, 1.01, "same"), ("+0001", 256, 1.0, 0.99, 1.01, "same")]
    )
    b = _run_folder(tmp_path, "b", 0.01, [("+0001", 0, 1.0, 0.99, 1.01, "same")])
    r = _compare(a, b)
    assert r.returncode == 0 and _line(r.stdout, "+0001", 256).endswith("only in A")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.json").write_text(json.dumps({"steps": {}}))
    r = _compare(a, tmp_path / "c")
    assert r.returncode != 0 and "no bench:decode step" in r.stderr


def test_the_committed_examples_compare_and_name_their_different_models():
    r = _compare(ROOT / "examples/h200-occupancy/cold", ROOT / "examples/h200-10min/h200")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NOT the same model" in r.stdout
    assert _line(r.stdout, "+0001", 122880).endswith("within floor")  # 1.042 ambiguous vs 1.035 faster, floor 3.1 %
