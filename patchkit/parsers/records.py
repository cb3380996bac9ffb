"""The frozen records the parsers return (one module, so every caller and the report share them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

CASE_STATUSES = ("ok", "fail", "not_supported", "skipped", "incomplete")
BACKEND_STATUSES = ("ok", "fail", "skipped", "not_run", "incomplete")
RUN_STATUSES = ("ok", "fail", "not_run", "incomplete")


class _AsDict:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True, kw_only=True)
class RawLog(_AsDict):
    """A patchkit raw log (written by patchkit.proc): `$ command`, optional `# cwd: DIR`, the tool's
    output, `# exit: N, S s` (N is 'timeout' when the run was killed: returncode None)."""

    command: str
    cwd: str | None = None
    returncode: int | None
    seconds: float
    output: str


# ------------------------------------------------------------------------------ test-backend-ops test


@dataclass(frozen=True, kw_only=True)
class TestCase(_AsDict):
    """One `  OP(params): RESULT` line.

    status: "ok" | "fail" | "not_supported"; also "skipped" (grad mode's "skipping large tensors for
    speed") and "incomplete" (the line was started but its result never printed: only with partial=True).
    details: error fragments printed for the case, in order (e.g. "[FLASH_ATTN_EXT] ERR = 0.1 > 0.0005").
    err_metric/err_value/err_threshold: parsed from the first "[OP] NMSE|ERR|MAA = v > t" fragment.
    unsupported_by: for not_supported, what the tool printed in brackets (backend names or a reason).
    line: 1-based line number in the source; listed_only: True for a failing case that the tool only
    named in its "Failing tests:" list (e.g. "failed to allocate tensors" returns before the case line).
    """

    __test__ = False  # not a pytest class

    op: str
    params: str
    status: str
    details: tuple[str, ...] = ()
    err_metric: str | None = None
    err_value: float | None = None
    err_threshold: float | None = None
    unsupported_by: str | None = None
    line: int
    listed_only: bool = False

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"


@dataclass(frozen=True, kw_only=True)
class BackendRun(_AsDict):
    """One `Backend i/n: NAME` section.

    status: "ok" (ran >= 1 case, all passed and the tool said OK), "fail", "skipped" (the tool printed a
    skip reason), "not_run" (not skipped but zero cases were run: 0/0, or all cases unsupported), or
    "incomplete" (output ended inside the section; only with partial=True).
    reported: what the tool printed on `  Backend X: OK|FAIL` ("ok" / "fail"), None if not printed.
    tests_passed/tests_total: from `  N/M tests passed` (None when not printed).
    """

    index: int
    total: int
    name: str
    status: str
    skip_reason: str | None = None
    description: str | None = None
    memory_total_mb: int | None = None
    memory_free_mb: int | None = None
    cases: tuple[TestCase, ...] = ()
    tests_passed: int | None = None
    tests_total: int | None = None
    failing_tests: tuple[str, ...] = ()
    reported: str | None = None
    backend_name: str | None = None
    fa_vec_slice_run: int | None = None
    fa_vec_slice_failed: int | None = None
    line: int

    @property
    def n_ok(self) -> int:
        return sum(c.status == "ok" for c in self.cases)

    @property
    def n_fail(self) -> int:
        return sum(c.status == "fail" for c in self.cases)

    @property
    def n_not_supported(self) -> int:
        return sum(c.status == "not_supported" for c in self.cases)


@dataclass(frozen=True, kw_only=True)
class TestRun(_AsDict):
    """A whole `test-backend-ops test` (or grad) console log.

    status: "fail" if any backend failed or the tool said FAIL; else "incomplete" if the output ended
    early (partial=True only); else "ok" if at least one backend ran cases and passed; else "not_run"
    (every backend skipped or ran zero cases - the tool itself prints OK for that).
    overall: the tool's last line ("ok" / "fail"), None if missing.
    """

    __test__ = False

    source: str
    status: str
    complete: bool
    device_count: int | None = None
    backends: tuple[BackendRun, ...] = ()
    backends_passed: int | None = None
    backends_total: int | None = None
    overall: str | None = None
    noise_lines: int = 0

    @property
    def cases(self) -> tuple[TestCase, ...]:
        return tuple(c for b in self.backends for c in b.cases)

    def backend(self, name: str) -> BackendRun:
        for b in self.backends:
            if b.name == name or b.backend_name == name:
                return b
        raise KeyError(name)


# ------------------------------------------------------------------------------ test-backend-ops perf


@dataclass(frozen=True, kw_only=True)
class PerfRecord(_AsDict):
    """One perf case. time_us is the mean time per run; flops in FLOP/s and bandwidth_gb_s in GiB/s as
    the tool computes them (0/None when not applicable); memory_kb per run. `supported` False: the
    backend does not support the case (time_us is then 0). extra: every other column by name (sql), or
    console-only values (console: flop_per_run)."""

    backend_name: str
    op_name: str
    op_params: str
    time_us: float
    n_runs: int
    supported: bool = True
    flops: float | None = None
    bandwidth_gb_s: float | None = None
    memory_kb: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int

    @property
    def name(self) -> str:
        return f"{self.op_name}({self.op_params})"


# ------------------------------------------------------------------------------------------- llama-bench


@dataclass(frozen=True, kw_only=True)
class BenchRecord(_AsDict):
    """One llama-bench test. flash_attn: -1 auto, 0 off, 1 on (old builds printed a bool: mapped to 0/1).
    samples_ns: nanoseconds per repetition; samples_ts: tokens/s per repetition. Fields the parser does
    not name are kept in `extra` (cpu_mask, split_mode, tensor_split, ...). The brief names model_filename
    OR model_type as the model key: model_type is required, model_filename is kept when present."""

    model_filename: str | None = None
    model_type: str
    n_prompt: int
    n_gen: int
    n_depth: int
    type_k: str
    type_v: str
    flash_attn: int
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...]
    samples_ns: tuple[int, ...]
    build_commit: str | None = None
    build_number: int | None = None
    backends: str | None = None
    gpu_info: str | None = None
    cpu_info: str | None = None
    devices: str | None = None
    n_threads: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    n_gpu_layers: int | None = None
    model_size: int | None = None
    model_n_params: int | None = None
    avg_ns: float | None = None
    stddev_ns: float | None = None
    test_time: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def test(self) -> str:
        """The test name as llama-bench's markdown table prints it: pp512, tg128, pp512+tg128, '... @ d4096'."""
        if self.n_prompt > 0 and self.n_gen == 0:
            name = f"pp{self.n_prompt}"
        elif self.n_gen > 0 and self.n_prompt == 0:
            name = f"tg{self.n_gen}"
        else:
            name = f"pp{self.n_prompt}+tg{self.n_gen}"
        if self.n_depth > 0:
            name += f" @ d{self.n_depth}"
        return name


# ------------------------------------------------------------------------------------- Nsight Compute


@dataclass(frozen=True, kw_only=True)
class KernelLaunch(_AsDict):
    """One profiled kernel launch from `ncu --csv`. duration_ns from gpu__time_duration.sum (converted to
    ns from its unit). grid/block: (x, y, z). metrics: every other metric by name (float when numeric,
    else the text), units: their units."""

    id: int
    kernel_name: str
    duration_ns: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    process_id: int | None = None
    stream: int | None = None
    device: int | None = None
    metrics: dict[str, float | str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    line: int


class KernelSummary(NamedTuple):
    name: str
    count: int
    total_ns: float
    share: float
