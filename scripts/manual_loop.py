"""patchkit's warm time to the kernel verdict as a ratio to the manual loop (issue 37's anchor).

    python3 scripts/manual_loop.py MANUAL_LOG WARM_RESULTS_JSON

MANUAL_LOG: what scripts/device-manual-loop.sh wrote (its line 'manual loop: build_s B perf_s P total_s T');
WARM_RESULTS_JSON: the warm run's results.json (its timeline's to_kernel_verdict_s and to_report_s, written
by patchkit.run.live and the run command). Prints one line; exit 2 when either number is missing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def manual_seconds(text: str) -> dict[str, float]:
    m = re.search(r"^manual loop: build_s ([\d.]+) perf_s ([\d.]+) total_s ([\d.]+)$", text, re.M)
    if not m:
        raise SystemExit("manual_loop.py: no 'manual loop: build_s ... total_s ...' line in the log")
    return dict(zip(("build_s", "perf_s", "total_s"), map(float, m.groups())))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    manual = manual_seconds(Path(argv[0]).read_text())
    tl = json.loads(Path(argv[1]).read_text()).get("timeline") or {}
    verdict = tl.get("to_kernel_verdict_s")
    if not verdict:
        print(f"{argv[1]}: no timeline.to_kernel_verdict_s (a run made before the live report)", file=sys.stderr)
        return 2
    report = tl.get("to_report_s")
    print(
        f"manual loop {manual['total_s']:.1f} s (build {manual['build_s']:.1f} s, perf {manual['perf_s']:.1f} s); "
        f"patchkit warm: kernel verdict {verdict:.1f} s = {verdict / manual['total_s']:.2f}x the manual loop"
        + (f", report {report:.1f} s" if report else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
