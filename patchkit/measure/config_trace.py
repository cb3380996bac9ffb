"""Which FA MMA config rows a llama.cpp process read (issue 37, patches/local/0011).

The MMA config table (GGML_CUDA_FATTN_MMA_CONFIG_CASE rows keyed by DKQ, DV, ncols in
ggml/src/ggml-cuda/fattn-mma-f16.cuh) is read on the host only through ggml_cuda_fattn_mma_get_config(DKQ, DV,
ncols, cc); device code of an instance reads only its own ncols's row at compile time. With the local test-only
patch 0011 and GGML_CUDA_FATTN_MMA_TRACE set, the host prints one stderr line per key the first time it is read
in a CUDA backend instance (llama-bench makes one per test):

    ggml_cuda: fattn mma config read: DKQ=256 DV=256 ncols=8 table=ampere

and each backend instance made while the variable is set first says so (`ggml_cuda: fattn mma config trace: on
(backend instance N)`): a test or process without that line is untraced (a binary without the patch, the variable
lost, stderr cut), and its reads are unknown, never "no row" (`traced`).
`bench:decode` passes llama-bench `--progress` too, so each read falls in a test (`llama-bench: benchmark i/N:
starting`), hence in a cell. A process none of whose reads hits a changed row computes what it computed before
the edit: `patchkit.run.rowscope` measures such cells (and numerics) again only where they could change."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends, proc
from patchkit.measure.tool import options_not_listed, usage_text
from patchkit.results.data.decode import DecodeConfigReads

ENV = "GGML_CUDA_FATTN_MMA_TRACE"
PATCH = "0011-cuda-fattn-mma-config-read-trace.patch"  # the recipe lists it: its CUDA binaries read ENV
PROGRESS = "--progress"  # llama-bench's per-test progress lines on stderr

_READ = re.compile(r"^ggml_cuda: fattn mma config read: (?P<kv>.*)$", re.M)
_ON = re.compile(r"^ggml_cuda: fattn mma config trace: on\b")  # once per CUDA backend instance, before its reads
_KV = re.compile(r"(\w+)=(\S+)")
_START = re.compile(r"^llama-bench: benchmark (\d+)/(\d+): starting\s*$")

Key = dict[str, int | str]  # one trace line's key: {"DKQ": 256, "DV": 256, "ncols": 8, "table": "ampere"}


def listed(series: Sequence) -> bool:
    """The recipe's series has the patch (any folder, any id: by its file name)."""
    return any(Path(p.file).name == PATCH for p in series)


def parse_key(line: str) -> Key | None:
    """One trace line's key (integers where the value is one); None for any other line."""
    m = _READ.match(line.rstrip("\n"))
    if not m:
        return None
    return {k: int(v) if v.lstrip("-").isdigit() else v for k, v in _KV.findall(m.group("kv"))}


def traced(text: str) -> bool:
    """A stderr text shows the trace on (a CUDA backend instance made with the variable set)."""
    return any(_ON.match(line) for line in text.splitlines())


def keys_in(text: str) -> list[Key]:
    """Every distinct key a stderr text shows being read, in the order first read."""
    out: list[Key] = []
    for line in text.splitlines():
        k = parse_key(line)
        if k is not None and k not in out:
            out.append(k)
    return out


def reads_by_test(stderr: str, n_tests: int) -> list[list[Key] | None]:
    """The keys each of a llama-bench process's `n_tests` tests read (test i: index i - 1), from its stderr;
    None for a test with no `trace: on` line (untraced: what it read is unknown).

    A line after `llama-bench: benchmark i/N: starting` belongs to test i (its context, so its backend instance,
    is made after that line); a line before any such line, or a process without `--progress`, belongs to every
    test (which one it came from cannot be told)."""
    per: list[list[Key]] = [[] for _ in range(n_tests)]
    on = [False] * n_tests
    current: int | None = None
    for line in stderr.splitlines():
        m = _START.match(line)
        if m:
            current = int(m.group(1)) - 1
            continue
        k = parse_key(line)
        if k is None and not _ON.match(line):
            continue
        for i in [current] if current is not None and 0 <= current < n_tests else range(n_tests):
            if k is None:
                on[i] = True
            elif k not in per[i]:
                per[i].append(k)
    return [keys if t else None for keys, t in zip(per, on)]


def hits(keys: Sequence[Key], rows: Sequence[dict]) -> list[Key]:
    """The keys that read one of `rows` (changed rows, old and new: {column: value, ...}): a key reads a row when
    each of its names that is a column of the row has the row's value (`table` is none: turing and volta fall
    back to ampere's rows, so a key's table does not tell which function's row it read)."""
    out = []
    for k in keys:
        for r in rows:
            shared = [n for n in k if n in r]
            if shared and all(r[n] == k[n] for n in shared):
                out.append(k)
                break
    return out


def key_text(k: Key) -> str:
    return " ".join(f"{n}={v}" for n, v in k.items())


@dataclass(frozen=True)
class Tracing:
    """Whether a step's processes trace their config reads, and how (`why`: one line when they do not)."""

    on: bool = False
    progress: bool = False  # llama-bench lists --progress: reads fall in tests
    why: str = ""

    def env(self) -> dict[str, str]:
        """The processes' environment: the variable set where traced, set empty (upstream's behaviour) else."""
        return {ENV: "1" if self.on else ""}

    def bench_args(self) -> tuple[str, ...]:
        return (PROGRESS,) if self.on and self.progress else ()


def tracing(series: Sequence, backend: str, usages: Sequence[str] = ()) -> Tracing:
    """The tracing of a step: where the recipe lists 0011 and the build is CUDA; `usages`: llama-bench's usage
    text of every binary (--progress only where each lists it)."""
    if backend != backends.CUDA.name:
        return Tracing(why=f"no config-read trace on the {backend} backend (only CUDA reads the FA MMA config rows)")
    if not listed(series):
        return Tracing(why=f"no config-read trace: the recipe does not list patches/local/{PATCH}")
    lack = any(options_not_listed(u, [PROGRESS]) for u in usages)
    why = "llama-bench lists no --progress: a process's reads count for each of its cells" if lack else ""
    return Tracing(on=True, progress=not lack, why=why)


def of_step(built) -> Tracing:
    """A step's tracing (patchkit.measure.tool.Built): llama-bench's usage of every measured binary."""
    if built.backend != backends.CUDA.name or not listed(built.ctx.recipe.series):
        return tracing(built.ctx.recipe.series, built.backend)
    return tracing(built.ctx.recipe.series, built.backend, [usage_text(b.exe("llama-bench")) for b in built.measured])


def record(reads: dict, stderr_log: Path, label: str, process: int, idents: Sequence[tuple]) -> None:
    """Add one llama-bench process's reads (its stderr log) to `reads`, by (label, cell identity); `idents`: its
    records' identities in test order (llama-bench writes one record per test, in the order it runs them)."""
    for ident, keys in zip(idents, reads_by_test(_read(stderr_log), len(idents))):
        got = reads.setdefault((label, ident), {"process": process, "keys": [], "traced": True})
        got["traced"] = got["traced"] and keys is not None  # once untraced, its reads stay unknown
        got["keys"] += [k for k in keys or () if k not in got["keys"]]


def store(result, t: Tracing, reads: dict, plan) -> None:
    """The trace and the --changed plan into bench:decode's data (DecodeData; nothing where neither applies)."""
    if t.on:
        result.config_reads = [
            DecodeConfigReads(variant=lab, ident=list(k), process=v["process"], keys=v["keys"], traced=v["traced"])
            for (lab, k), v in reads.items()
            if k not in plan.skip
        ]
        # the cells left out (a cut process may still run some; their records are dropped): each arm's reads as the
        # earlier run recorded them, with the run where the cell's numbers stand
        result.config_reads += [DecodeConfigReads(**r) for r in plan.carried]
    if plan.why:
        result.rows_scope = plan.to_dict()


# numerics' processes: gen-d<depth>-p<prompt>-<variant>, kld-<variant> (each may be run again: -try<n>)
_NUMERICS_LOG = re.compile(r"^(?:gen-d\d+-p\d+|kld)-(?P<variant>.+?)(?:-try\d+)?(?:\.\d+)?\.log$")


def process_reads(run: Path, logs: Sequence[str], variants: Sequence[str]) -> list[dict]:
    """numerics' reads per process: {variant, log, keys, traced} for each generation and KL divergence log (`logs`:
    relative to the run folder) of one of `variants`, from its stderr log (traced: it shows the `trace: on` line)."""
    out = []
    for rel in logs:
        m = _NUMERICS_LOG.match(Path(rel).name)
        if not m or m.group("variant") not in variants:
            continue
        text = _read(proc.stderr_log(run / rel))
        out.append({"variant": m.group("variant"), "log": rel, "keys": keys_in(text), "traced": traced(text)})
    return out


def _read(p: Path) -> str:
    return p.read_text(errors="replace") if p.is_file() else ""


def left_out(t: Tracing, plan, every: Sequence[Sequence[str]]) -> dict:
    """bench:decode's data when --changed left every cell out (no process ran): the plan, and the cells' earlier
    reads with the processes' arguments (`argvs`: every process of a round, the real model's too), so that the
    next edit's run can leave them out again ({} without a plan)."""
    if not plan.why:
        return {}
    reads = [DecodeConfigReads(**r).to_dict() for r in plan.carried] if t.on else []
    return {
        "rows_scope": plan.to_dict(),
        **({"config_reads": reads, "argvs": [list(a) for a in every]} if reads else {}),
    }
