#!/usr/bin/env python3
"""Issue 37: does loading a depth's state from a file (patches/local/0010) change what llama-bench times, and
what does it save?

One llama-bench binary, one command line at a depth, alternating processes: `prefill` (LLAMA_BENCH_DEPTH_STATE_DIR
empty: upstream's behaviour, the depth prefilled) and `load` (the variable names a folder that a first `save`
process filled: the depth loaded). Each process's raw logs go to OUT/raw/ab-r<round>-<mode>.log (stdout, llama-bench's
JSON) and .stderr.log ("state loaded from" / "state saved to"). Prints per mode the processes' wall seconds and
per test the ratio load / prefill of the t/s samples with its exact distribution-free interval
(patchkit.measure.stats.ratio, as bench:decode computes a variant against base).

    python3 scripts/depth_state_ab.py run OUT --bench BIN/llama-bench --pairs 4 -- -m MODEL -d 4096 -n 16 ...
    python3 scripts/depth_state_ab.py show OUT
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

from patchkit import parsers, proc
from patchkit.measure import stats

ENV = "LLAMA_BENCH_DEPTH_STATE_DIR"


def run(out: Path, bench: str, pairs: int, args: list[str]) -> None:
    states = out / "states"
    shutil.rmtree(states, ignore_errors=True)
    states.mkdir(parents=True)
    plan = [(0, "save")] + [(r, m) for r in range(1, pairs + 1) for m in (("prefill", "load")[:: 1 if r % 2 else -1])]
    for r, mode in plan:
        env = {ENV: "" if mode == "prefill" else str(states)}
        log = out / "raw" / f"ab-r{r}-{mode}.log"
        proc.run([bench, *args, "-o", "json"], log=log, env=env, separate_stderr=True, echo=False)
        err = proc.stderr_log(log).read_text()
        said = "loaded" if "state loaded from" in err else "saved" if "state saved to" in err else "-"
        print(f"round {r} {mode}: {parsers.read_raw_log(log).seconds} s, state {said}", flush=True)
    shutil.rmtree(states, ignore_errors=True)


def show(out: Path) -> str:
    secs: dict[str, list[float]] = {}
    samples: dict[tuple, dict[str, list[float]]] = {}
    for log in sorted((out / "raw").glob("ab-r*-*.log")):
        m = re.match(r"ab-r(\d+)-(\w+)\.log$", log.name)
        if not m:
            continue
        mode, raw = m.group(2), parsers.read_raw_log(log)
        secs.setdefault(mode, []).append(raw.seconds)
        for rec in parsers.parse_llama_bench_json(raw.output, str(log)):
            key = (rec.test, rec.n_depth)
            samples.setdefault(key, {}).setdefault(mode, []).extend(rec.samples_ts)
    lines = ["| mode | processes | wall s each | median |", "|---|---|---|---|"]
    for mode, s in secs.items():
        lines.append(f"| {mode} | {len(s)} | {', '.join(f'{x:.1f}' for x in s)} | {statistics.median(s):.1f} |")
    lines += ["", "| test | prefill t/s (median, n) | load t/s (median, n) | load / prefill [interval, coverage] |"]
    lines.append("|---|---|---|---|")
    for (test, _depth), s in samples.items():
        if not (s.get("prefill") and s.get("load")):
            continue
        r = stats.ratio(s["prefill"], s["load"])
        med = {k: statistics.median(v) for k, v in s.items()}
        lines.append(
            f"| {test} | {med['prefill']:.2f} ({len(s['prefill'])}) | {med['load']:.2f} ({len(s['load'])}) "
            f"| {r.ratio:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}, {100 * r.ci_level:.1f} %] |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("run", "show"))
    ap.add_argument("out", type=Path)
    ap.add_argument("--bench", help="the llama-bench binary (run)")
    ap.add_argument("--pairs", type=int, default=4, help="prefill/load pairs, the order alternating (run)")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # llama-bench's arguments after --, without -o (run)
    a = ap.parse_args(argv[:cut])
    if a.what == "run":
        run(a.out, a.bench, a.pairs, argv[cut + 1 :])
    print(show(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
