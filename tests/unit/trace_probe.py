"""A stand-in for a CUDA build with patches/local/0011, for the tests of the config-read trace (issue 37).

A CUDA llama-bench cannot run on this machine (no GPU). The stand-in is a real process the step starts: it
records its arguments and its GGML_CUDA_FATTN_MMA_TRACE, writes llama-bench's REAL recorded output for the tests
its -d and -ub select (tests/fixtures/bases/0.3.36/lb-matrix-pp.json, the CPU profile's pp process: pp16 at
micro-batches 16, 4, 1 and depths 0 and 256), and on stderr the REAL recorded `--progress` lines of those tests
(lb-matrix-pp.stderr.txt, renumbered when a cut selects fewer) with, when the variable is set non-empty, the trace
lines patch 0011 prints after each test's `starting` line. The trace lines' FORMAT is the patch's own (its
fprintf); which keys each test reads (`READS`, by micro-batch) is made up for the test, not recorded from a GPU run
yet. numerics' tools (llama-completion, llama-perplexity) print the closing lines the step waits for."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "bases" / "0.3.36"
ARGV = ["-m", "m.gguf", "-fa", "1", "-ctk", "q4_0", "-ctv", "q4_0", "-p", "16", "-n", "0", "-d", "0,256", "-r", "2"]
ARGV += ["-ngl", "0", "-ub", "16,4,1", "-o", "json"]  # the fixture's process (without --progress: the step adds it)
# made up: the micro-batch 4 tests read the (256, 256, 8) row, the others the (256, 256, 16) row
READS = {16: [(256, 256, 16)], 4: [(256, 256, 8)], 1: [(256, 256, 16)]}

_SCRIPT = """#!{python}
import sys
sys.path.insert(0, {root!r})
from tests.unit.trace_probe import main
main()
"""


def install(folder: Path, tools=("llama-bench", "llama-completion", "llama-perplexity")) -> Path:
    """The stand-in as each of `tools` in `folder` (a variant's bin folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    for t in tools:
        p = folder / t
        p.write_text(_SCRIPT.format(python=sys.executable, root=str(ROOT)))
        p.chmod(0o755)
    return folder


def calls(folder: Path) -> list[dict]:
    """What each start of a stand-in in `folder` recorded: {tool, argv, trace}."""
    f = folder / "calls.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.is_file() else []


def trace_line(k: tuple[int, int, int]) -> str:
    """One line as patch 0011 prints it (ggml-cuda.cu: ggml_cuda_fattn_mma_trace_read's fprintf)."""
    return f"ggml_cuda: fattn mma config read: DKQ={k[0]} DV={k[1]} ncols={k[2]} table=ampere"


ON = "ggml_cuda: fattn mma config trace: on (backend instance {n})"  # 0011 prints it once per backend instance


def blocks() -> list[list[str]]:
    """The recorded stderr's lines of each test (test i: index i - 1)."""
    out: list[list[str]] = []
    for line in (FIX / "lb-matrix-pp.stderr.txt").read_text().splitlines():
        if line.endswith(": starting"):
            out.append([])
        out[-1].append(line)
    return out


def stderr_for(picked: list[int], trace: bool, progress: bool = True, on: bool = True) -> str:
    """The stderr of a process running the recorded tests `picked` (indexes), as llama-bench with 0011 writes it
    (`on`: each test's backend instance says the trace is on first; False: as if the line were lost)."""
    recs = json.loads((FIX / "lb-matrix-pp.json").read_text())
    out = []
    for j, i in enumerate(picked, 1):
        for line in blocks()[i]:
            if progress:
                _, rest = line.split(": ", 1)[1].split(":", 1)
                out.append(f"llama-bench: benchmark {j}/{len(picked)}:{rest}")
            if line.endswith(": starting") and trace:
                out += [ON.format(n=j)] if on else []
                out += [trace_line(k) for k in READS[recs[i]["n_ubatch"]]]
    return "\n".join(out) + "\n"


def _arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv else ""


def main() -> None:
    tool, argv = Path(sys.argv[0]).name, sys.argv[1:]
    trace = os.environ.get("GGML_CUDA_FATTN_MMA_TRACE")
    with open(Path(sys.argv[0]).parent / "calls.jsonl", "a") as f:
        f.write(json.dumps({"tool": tool, "argv": argv, "trace": trace}) + "\n")
    if tool == "llama-completion":
        print("the generated text")
        if trace:
            sys.stderr.write(ON.format(n=1) + "\n" + trace_line((256, 256, 8)) + "\n")
        sys.stderr.write("prompt eval time =  1.0 ms /  4 tokens\ncommon_perf_print: total\n")
        return
    if tool == "llama-perplexity":
        if trace:
            sys.stderr.write(ON.format(n=1) + "\n" + trace_line((256, 256, 16)) + "\n")
        sys.stderr.write("Final estimate: PPL = 1.0\nMean    KLD:   0.0\nMaximum KLD:   0.0\n99.0%   KLD:   0.0\n")
        sys.stderr.write("Same top p:  100.0\n")
        return
    depths = {int(x) for x in _arg(argv, "-d").split(",")}
    ubs = {int(x) for x in _arg(argv, "-ub").split(",")}
    recs = json.loads((FIX / "lb-matrix-pp.json").read_text())
    picked = [i for i, r in enumerate(recs) if r["n_depth"] in depths and r["n_ubatch"] in ubs]
    print(json.dumps([recs[i] for i in picked], indent=2))
    # TRACE_PROBE_NO_ON set: as a build whose `trace: on` lines never arrive (stderr cut, say), the reads do
    sys.stderr.write(stderr_for(picked, bool(trace), "--progress" in argv, on=not os.environ.get("TRACE_PROBE_NO_ON")))
