#!/usr/bin/env python3
"""Issue 37 item 4: does GGML_TEST_PERF_FILL=fast (patches/local/0007) change what is timed, and what does it save?

Reads the logs of scripts/device-fill-ab.sh (one binary, the variable unset ("upstream") and set ("fast"),
alternating rounds, raw/perf-r<round>-<mode>.log) and prints, per case, the ratio fast / upstream of the
timed mean (test-backend-ops' avg_time_us, one sample a process) with its exact distribution-free interval
(patchkit.measure.stats.ratio, as bench:kernel computes vs base), and per mode the processes' wall seconds
and the initialize_tensors seconds of their phase lines (patches/local/0006).

    python3 scripts/fill_ab.py examples/h200-fill-ab

Any two modes recorded the same way compare too: `--modes fast,chunks` reads perf-r<round>-{fast,chunks}.log (two
builds, patches/local/0007 against 0008, both with GGML_TEST_PERF_FILL=fast: tests/fixtures/fill-chunks).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path

from patchkit.measure import stats

_spec = importlib.util.spec_from_file_location("perf_budget", Path(__file__).with_name("perf_budget.py"))
perf_budget = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = perf_budget  # its dataclasses look their module up
_spec.loader.exec_module(perf_budget)

MODES = ("upstream", "fast")


def read(folder: Path, modes: tuple[str, str] = MODES) -> dict[str, list]:
    """mode -> its processes (perf_budget.Process), in round order (the first mode is the reference)."""
    out: dict[str, list] = {m: [] for m in modes}
    for log in sorted((folder / "raw").glob("perf-r*-*.log"), key=lambda p: perf_budget._log_key(p)):
        m = re.match(r"perf-r\d+-(\w+)\.log$", log.name)
        if m and m.group(1) in out:
            out[m.group(1)].append(perf_budget.read_process(log))
    return out


def render(procs: dict[str, list]) -> str:
    a, b = modes = tuple(procs)
    samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: {m: [] for m in modes})
    for mode, ps in procs.items():
        for p in ps:
            for c in p.cases:
                samples[c.params][mode].append(c.timed_s / c.n_runs * 1e6)
    lines = [
        f"| case | {a} us (median) | {b} us (median) | {b} / {a} [interval, coverage] |",
        "|---|---|---|---|",
    ]
    for params, s in samples.items():
        if not all(s[m] for m in modes):
            continue
        r = stats.ratio(s[a], s[b])
        med = {m: stats.summarize(s[m]).median for m in modes}
        cover = f"{100 * r.ci_level:.1f} %" if r.ci_level is not None else "?"
        lines.append(
            f"| {perf_budget.size_of(params)} | {med[a]:.2f} | {med[b]:.2f} | "
            f"{r.ratio:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}], {cover} |"
        )
    lines.append("")
    for mode in modes:
        ps = procs[mode]
        wall = [p.wall_s for p in ps]
        init = [sum(x["init"] for x in p.phases) / 1e6 for p in ps if p.phases]
        lines.append(
            f"{mode}: {len(ps)} processes, wall {sum(wall):.1f} s (mean {sum(wall) / max(1, len(wall)):.2f} s)"
            + (f", initialize_tensors {sum(init):.1f} s (mean {sum(init) / len(init):.2f} s a process)" if init else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="the folder holding raw/perf-r*-{upstream,fast}.log")
    ap.add_argument("--modes", default=",".join(MODES), help="the reference and the other mode (default upstream,fast)")
    a = ap.parse_args(argv)
    modes = tuple(a.modes.split(","))
    if len(modes) != 2 or not all(re.fullmatch(r"\w+", m) for m in modes):
        print(f"patchkit: error: --modes {a.modes!r}: two names joined by a comma (upstream,fast)", file=sys.stderr)
        return 2
    procs = read(a.folder, modes)
    if not all(procs[m] for m in modes):
        print(f"{a.folder}: no raw/perf-r*-{modes[0]}.log or -{modes[1]}.log", file=sys.stderr)
        return 2
    print(render(procs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
