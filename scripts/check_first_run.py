"""CI: the README's first command's run must hold a report and no step in error, and its exit status
must agree with its steps (0 when none failed or errored, 1 otherwise); on the CPU each variant of the default
recipe (two CUDA patches) must be "no compiled change", not measured (issue 37: a variant built from a tree git
called dirty was measured on the CPU for 381 s).

    python3 scripts/check_first_run.py WORK_FOLDER EXIT_STATUS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(work: str, status: str) -> int:
    runs = sorted(Path(work).glob("runs/*/*/results.json"), key=lambda p: p.stat().st_mtime)
    if not runs:
        print(f"check_first_run: no run folder under {work}/runs", file=sys.stderr)
        return 1
    results = json.loads(runs[-1].read_text())
    steps = results["steps"]
    for name, s in steps.items():
        print(f"  {name:<20} {s['status']:<8} {s.get('seconds', 0):>7.1f} s  {s.get('reason', '')[:100]}")
    bad = [n for n, s in steps.items() if s["status"] == "error"]
    failed = [n for n, s in steps.items() if s["status"] in ("error", "fail")]
    report = runs[-1].parent / "report.md"
    problems = []
    if bad:
        problems.append(f"steps in error: {', '.join(bad)}")
    if not report.is_file():
        problems.append(f"no {report}")
    build = steps.get(f"build:{results.get('backend')}", {}).get("data", {})
    names = [v.get("name") for v in results.get("variants", [])]
    default = results.get("recipe") == "seed-fattn" and names == ["base", "+0001", "+0001+0002"]
    if default and results.get("backend") == "cpu":
        measured = [
            v["variant"] for v in build.get("variants", [])[1:] if v["variant"] not in build.get("same_code", {})
        ]
        if measured or not build.get("variants"):
            problems.append(f"variants measured on the cpu, not 'no compiled change': {measured or 'no build data'}")
    if (int(status) != 0) != bool(failed):
        problems.append(f"exit status {status} but failed or errored steps: {failed or 'none'}")
    for p in problems:
        print(f"check_first_run: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
