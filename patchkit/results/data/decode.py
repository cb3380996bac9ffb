"""`bench:decode`'s stored data (patchkit.measure.decode writes it; see docs/decode-matrix.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchkit.results.data.base import ABSENT, Data, StepData
from patchkit.results.data.kernel import ClocksData, UpstreamDb


@dataclass(kw_only=True)
class DecodeTimingData(Data):
    """Interleaved rounds with an A/A copy of base (patchkit.measure.decode.DecodeTiming, as the run used it)."""

    min_rounds: int  # rounds every cell runs at least
    max_rounds: int  # rounds a cell runs at most
    max_noise: float  # settled: every binary's t/s samples have at most this relative stdev
    max_seconds: float  # no new round after this many s of llama-bench processes (0: no cap)
    aa: bool  # an A/A copy of base ran
    max_floor: float = ABSENT  # a cell whose own A/A floor is above this is 'noisy' (absent: before issue 36)
    per_cell: bool = ABSENT  # verdicts against each cell's own A/A floor (absent: before issue 36, one floor)


@dataclass(kw_only=True)
class DecodeCell(Data):
    """One variant's samples of one llama-bench test (a cell: test, depth, micro-batch, K/V types)."""

    variant: str  # the variant (base#2: never stored as a row; its cell is in `aa`)
    test: str = ABSENT  # llama-bench's name: pp512, tg32, pp512@d32768 (absent: format 1, set by the upgrade)
    depth: int  # llama-bench -d (n_depth)
    model_type: str = ABSENT  # llama-bench's model_type (absent: runs before issue 27)
    n_prompt: int = ABSENT  # -p of this test (absent: runs before issue 27)
    n_gen: int  # -n of this test
    n_batch: int = ABSENT  # -b (absent: runs before issue 27)
    n_ubatch: int = ABSENT  # -ub, the micro-batch (absent: runs before issue 27)
    type_k: str  # K cache type
    type_v: str  # V cache type
    n_gpu_layers: int = ABSENT  # -ngl (absent: runs before issue 27)
    samples_ts: list[float]  # t/s, every repetition of every round
    rounds: int = ABSENT  # rounds this cell ran (absent: runs without an A/A copy)
    stop: str = ABSENT  # why it stopped: settled / max_rounds / max_seconds (absent: runs without an A/A copy)
    avg_ts: float  # mean t/s
    stddev_ts: float  # stdev of the samples (0 with one)
    median: float  # t/s
    ci_low: float  # the median's order-statistic interval
    ci_high: float  # (t/s)
    log: str  # the first raw log (relative to the run folder)
    logs: list[str]  # every raw log of the cell


@dataclass(kw_only=True)
class DecodeRatio(Data):
    """A variant's cell against base's: t/s(variant) / t/s(base), its exact interval and verdict."""

    variant: str
    test: str
    depth: int
    ratio: float  # > 1: the variant is faster (Hodges-Lehmann)
    ci_low: float
    ci_high: float
    ci_level: float | None  # the interval's exact coverage
    n_ref: int  # samples of base
    n_new: int  # samples of the variant
    floor: float | None = ABSENT  # the cell's own A/A floor (None: no A/A cell; absent: before issue 36)
    n_ubatch: int = ABSENT  # the cell's micro-batch (absent: before issue 36)
    verdict: str  # faster / slower / same / noisy / too few samples (older runs: ambiguous)


@dataclass(kw_only=True)
class DecodeAA(Data):
    """One cell's A/A ratio: t/s(base#2) / t/s(base), and the cell's floor from it."""

    test: str
    depth: int
    ratio: float
    ci_low: float
    ci_high: float
    ci_level: float | None
    n_ref: int
    n_new: int
    median_ts: float  # base#2's median t/s
    floor: float = ABSENT  # the interval's edge farthest from 1 (stats.cell_floor; absent: before issue 36)
    ident: list[Any] = ABSENT  # the cell's llama-bench identity (measure.decode_args.IDENTITY; absent: before 36)


@dataclass(kw_only=True)
class DecodeReal(Data):
    """The small matrix on the real model ([model] package / path; docs/decode-matrix.md): its cells ran in the
    matrix's interleaved rounds (A/A copy included), their logs `decode-real-r<round>-<label>`."""

    model: dict[str, Any]  # the real model's description (measure.model.real_info, with its `label`)
    model_path: str  # the GGUF llama-bench ran
    argv: list[str]  # llama-bench's arguments of its one process a round
    rows: list[DecodeCell]  # one per (variant, cell), variants in order, base first
    vs_base: list[DecodeRatio]  # one per (variant, cell) but base
    aa: list[DecodeAA]  # each cell's A/A ratio and floor
    note: str = ""  # what the series changes (or not) on this model (the recipe's real-note)


@dataclass(kw_only=True)
class DecodeConfigReads(Data):
    """The FA MMA config rows one arm read at one cell (patches/local/0011's trace, GGML_CUDA_FATTN_MMA_TRACE;
    patchkit.measure.config_trace): what `--changed` on a rows-only edit needs to leave the cell out."""

    variant: str  # the arm: a variant or base's A/A copy (base#2)
    ident: list[Any]  # the cell's llama-bench identity (measure.decode_args.IDENTITY)
    process: int  # which process of a round runs it (an index into `argvs`, the real model's after them)
    keys: list[dict[str, Any]]  # each key read, as its trace line says: {DKQ, DV, ncols, table}
    # every process of the arm's cell showed the trace on (its `trace: on` line); False: its reads are unknown, so
    # --changed never leaves the cell out (absent: recorded before that line existed, the same)
    traced: bool = ABSENT
    carried_from: str = ABSENT  # a cell --changed left out: its reads (and numbers) are those of this earlier run


@dataclass(kw_only=True)
class DecodeData(StepData):
    """bench:decode. Everything but `inputs` is written once llama-bench gave a record (a step that errored
    first may hold only `inputs`, or what the pipeline knew)."""

    KIND = "bench:decode"
    model: dict[str, Any] = ABSENT  # the model's description (measure.model.describe / real_info)
    model_path: str = ABSENT  # the GGUF llama-bench ran
    argvs: list[list[str]] = ABSENT  # llama-bench's arguments, one list per process of a round (format 2: `args`)
    rounds: int = ABSENT  # the least rounds
    rows: list[DecodeCell] = ABSENT  # one per (variant, cell), variants in order, base first
    vs_base: list[DecodeRatio] = ABSENT  # one per (variant, cell) but base
    upstream_db: UpstreamDb | dict[str, Any] | None = ABSENT  # llama-bench.sqlite ({} or None: not written)
    # issue 27 (runs with an A/A copy of base; absent before)
    timing: DecodeTimingData = ABSENT
    rounds_run: int = ABSENT  # rounds of the step (its slowest cell)
    aa: list[DecodeAA] = ABSENT  # each cell's A/A ratio
    noise_floor: float = ABSENT  # the largest cell floor (before issue 36: the one floor of all cells)
    aa_label: str = ABSENT  # the A/A copy's label (base#2)
    clocks: ClocksData = ABSENT  # runs before hooks (issue 35): GPU clocks around each process
    process_seconds: float = ABSENT  # llama-bench processes, summed (as the raw logs say; the real model's too)
    real: DecodeReal = ABSENT  # the real model's cells (absent: no real model named, or runs before it)
    real_missing: str = ABSENT  # why the named real model's cells did not run (its install failed; absent: they ran)
    # issue 37 (absent: no trace, i.e. no patches/local/0011 in the recipe, a CPU build, or runs before it)
    config_reads: list[DecodeConfigReads] = ABSENT  # per arm and cell, the config rows its processes read
    # --changed: patchkit.run.rowscope.DecodePlan (why, runs, cells, first_argvs, carried)
    rows_scope: dict[str, Any] = ABSENT  # --changed: why (one line), the cells left out and where they stand

    @property
    def measured(self) -> bool:
        return self.rows is not ABSENT
