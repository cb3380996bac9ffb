#!/usr/bin/env python3
"""Do two runs' decode verdicts agree? (issue 27: "every decode verdict in the summary agrees between
the two, or the difference is inside the reported floor")

    python3 scripts/compare_decode.py RUN_A RUN_B

RUN_A and RUN_B are run folders (or their results.json). For every (variant, depth) of `bench:decode`
in either run it prints each run's ratio (t/s new / base, Hodges-Lehmann), interval, verdict, and one of

* `agree`: the same verdict in both runs;
* `within floor`: the verdicts differ but the two ratios differ by no more than the larger of the two
  runs' decode A/A floors (`noise_floor`; 0 for runs recorded without an A/A copy);
* `DIFFER`: the verdicts differ by more than that;
* `only in A` / `only in B`: measured in one run only (not counted as a disagreement).

Reads results.json only (nothing is run or written). Exit status 0 when nothing differs, 1 when a
verdict differs beyond the floor, 2 when a run has no decode step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(arg: str) -> dict:
    """The bench:decode step's data of a run folder or results.json; exits 2 with one line if none."""
    path = Path(arg)
    if path.is_dir():
        path = path / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        sys.exit(f"compare_decode: error: {path}: {e}")
    step = (data.get("steps") or {}).get("bench:decode")
    if not isinstance(step, dict) or not isinstance((step.get("data") or {}).get("vs_base"), list):
        sys.exit(f"compare_decode: error: {path}: no bench:decode step with ratios (vs_base)")
    return step["data"]


def rows(data: dict) -> dict[tuple[str, int, str], dict]:
    """(variant, depth, test) -> its vs_base row."""
    return {(r["variant"], int(r["depth"]), str(r.get("test", ""))): r for r in data["vs_base"]}


def floor(data: dict) -> float:
    return float(data.get("noise_floor") or 0.0)


def judge(a: dict | None, b: dict | None, limit: float) -> str:
    """How two rows of the same (variant, depth) compare: see the module docstring."""
    if a is None or b is None:
        return "only in B" if a is None else "only in A"
    if a["verdict"] == b["verdict"]:
        return "agree"
    if abs(float(a["ratio"]) - float(b["ratio"])) <= limit:
        return "within floor"
    return "DIFFER"


def model(data: dict) -> str:
    """The decode model's type and checksum, as recorded (runs before issue 27 recorded none)."""
    m = data.get("model") or {}
    if not m:
        return "not recorded"
    what = f"{m.get('n_layer', '?')} layers, n_embd {m.get('n_embd', '?')}, {m.get('weight_type', '?')}"
    return f"{what} ({str(m.get('sha256', ''))[:12] or 'no sha256'})"


def cell(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['ratio']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] {r['verdict']}"


def compare(da: dict, db: dict) -> tuple[list[str], int]:
    """The table's lines and the number of rows that differ beyond the floor."""
    fa, fb = floor(da), floor(db)
    limit = max(fa, fb)
    ra, rb = rows(da), rows(db)
    lines = [
        f"model: A {model(da)}, B {model(db)}"
        + ("" if model(da) == model(db) else " (NOT the same model: the ratios are of different workloads)"),
        f"decode A/A floor: A {fa * 100:.2f} %, B {fb * 100:.2f} % "
        f"(a difference of ratios up to {limit:.4f} is within it)",
        f"{'variant':<14} {'depth':>7}  {'A: ratio [interval] verdict':<36} {'B: ratio [interval] verdict':<36} result",
    ]
    bad = 0
    for key in sorted(set(ra) | set(rb), key=lambda k: (k[0], k[1], k[2])):
        a, b = ra.get(key), rb.get(key)
        what = judge(a, b, limit)
        bad += what == "DIFFER"
        lines.append(f"{key[0]:<14} {key[1]:>7}  {cell(a):<36} {cell(b):<36} {what}")
    n = len(set(ra) | set(rb))
    lines.append(f"{n - bad} of {n} agree or differ within the floor" + (f"; {bad} DIFFER" if bad else ""))
    return lines, bad


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: compare_decode.py RUN_A RUN_B", file=sys.stderr)
        return 2
    lines, bad = compare(load(argv[0]), load(argv[1]))
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
