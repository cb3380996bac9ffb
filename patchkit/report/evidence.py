"""The report's evidence: everything the report shows, as typed data, and its JSON form (`--format json`).

One dataclass per section (and per entry of a section). Values copied verbatim from results.json where the
report does not look inside them (a kernel case's per-variant statistics, a build's options, env.json) stay
plain dicts. `to_data` turns the evidence into the JSON document: a field's JSON key is its name (or
metadata "key"); a field with metadata FLAT is an optional part whose fields are merged into its parent when
present (a step's measurements: absent when the step measured nothing); a field with metadata OMITTED is left
out when None, one with HIDDEN always (a link to evidence the JSON holds elsewhere). Non-finite floats become
null. The JSON is ASCII (other characters escaped).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from patchkit.measure import numerics as numerics_data
from patchkit.measure import path as path_data
from patchkit.measure import test as test_data
from patchkit.report.runview import RunView
from patchkit.results import Step
from patchkit.results.data import Data
from patchkit.results.data import build as build_data
from patchkit.results.data import check as check_data
from patchkit.results.data import kernel as kernel_data

REPORT_SCHEMA = 1
R = TypeVar("R", bound="StepRun")


FLAT = {"json": "flat"}  # an optional part (None or a dataclass) whose fields appear in the parent's JSON object
OMITTED = {"json": "omitted"}  # an optional field, left out of the JSON object when None
HIDDEN = {"json": "hidden"}  # a link between parts of the evidence, never in the JSON (it is there elsewhere)


def state(name: str, step: Step | None) -> tuple[str, str]:
    """(status, reason) of a step; status 'absent' when the run has no such step."""
    if step is None:
        return "absent", f"no `{name}` step in this run"
    return str(step.status), step.reason


# ---------------------------------------------------------------------------------------------
# A step's result in one run


@dataclass(kw_only=True)
class StepState:
    gpu: str
    status: str
    reason: str


@dataclass(kw_only=True)
class StepRun(StepState):
    logs: list[str]

    @classmethod
    def of(cls: type[R], run: RunView, name: str, step: Step | None, **kw: Any) -> R:
        """The entry of `run` for step `name` (shown as `name` when absent), with its logs."""
        status, reason = state(name, step)
        return cls(gpu=run.gpu, status=status, reason=reason, logs=run.logs(step.logs) if step else [], **kw)


# ---------------------------------------------------------------------------------------------
# Runs, prose, patches, hardware


@dataclass(kw_only=True)
class RunInfo:
    gpu: str
    run_id: str
    created: Any
    log_prefix: str


@dataclass(kw_only=True)
class Patch:
    id: str
    file: str
    subject: str
    upstream_pr: str
    depends_on: list[str]
    local: bool
    sha256: str


@dataclass(kw_only=True)
class Related:
    """A related upstream PR or issue (recipe_info.related): 'owner/repo#N: what' or a URL."""

    ref: str  # as the recipe gives it
    url: str  # '' when it is neither a GitHub reference nor a URL
    label: str  # the link's text ('ggml-org/llama.cpp#15035')
    text: str  # what it is about ('use mma FA kernel for gqa > 4 on RTX 4000')


@dataclass(kw_only=True)
class Prose:
    """The author's words, as the recipe gives them (reflowed only when rendered)."""

    title: str
    overview: str
    ai_disclosure: str
    notes: list[str]
    from_run: str
    related: list[Related] = field(default_factory=list)


@dataclass(kw_only=True)
class Hardware:
    gpu: str
    run_id: str
    created: Any
    recipe: Any
    env: dict[str, Any] | None
    env_missing: bool
    base: dict[str, Any]
    patches: dict[str, str]
    timeline: dict[str, Any] | None = None  # wall time, busy time per lane, critical path (patchkit.results.timeline)


# ---------------------------------------------------------------------------------------------
# build:<config> and check:<config>


@dataclass(kw_only=True)
class BuildVariant:
    variant: str
    key: str
    head: str
    seconds: float
    reused: bool
    log: str | None  # from the report's folder
    cleared: build_data.ClearedData | None = None  # units not recompiled ([[affects]] units; None: none)


@dataclass(kw_only=True)
class BuildConfig:
    config: str
    status: str
    reason: str
    seconds: float
    options: build_data.BuildOptionsData | None  # None: an interrupted build
    cmake_args: list[str]
    variants: list[BuildVariant]
    logs: list[str]
    same_code: dict[str, str] = field(default_factory=dict)  # variant -> why it compiles to base's code
    same_code_measured: list[str] | None = field(default=None, metadata=OMITTED)  # such, measured anyway


@dataclass(kw_only=True)
class CheckConfig:
    config: str
    status: str
    reason: str
    items: list[check_data.CheckItem]  # as stored, `cleared` '' where absent
    logs: list[str]


@dataclass(kw_only=True)
class BuildsRun:
    """One run's builds and compile checks; status/reason only when it has no build step."""

    gpu: str
    configs: list[BuildConfig]
    checks: list[CheckConfig]
    status: str | None = field(default=None, metadata=OMITTED)
    reason: str | None = field(default=None, metadata=OMITTED)
    checks_reason: str | None = field(default=None, metadata=OMITTED)
    same_code: dict[str, str] = field(default_factory=dict)  # variant -> why it was not measured
    scope: dict[str, Any] | None = field(default=None, metadata=OMITTED)  # --changed (patchkit.run.scope)


# ---------------------------------------------------------------------------------------------
# test:<suite>


@dataclass(kw_only=True)
class TestVariant:
    """A variant's stored result (patchkit.measure.test.TestVariant) as shown: its log from the report's
    folder, without its logs per process."""

    variant: str
    status: str
    reason: str
    log: str | None
    seconds: float
    n_ok: int
    n_fail: int
    n_not_supported: int
    backends: list[test_data.TestBackend]


@dataclass(kw_only=True)
class TestData:
    args: list[str]
    backend: str | None
    variants: list[TestVariant]
    diff: dict[str, test_data.TestDiff]  # variant -> its cases against base's


@dataclass(kw_only=True)
class TestRun(StepRun):
    measured: TestData | None = field(default=None, metadata=FLAT)


@dataclass(kw_only=True)
class Suite:
    suite: str
    runs: list[TestRun]


@dataclass(kw_only=True)
class Tests:
    suites: list[Suite]
    runs: list[StepState] | None = field(default=None, metadata=OMITTED)  # only when no run has a test step


# ---------------------------------------------------------------------------------------------
# bench:kernel


@dataclass(kw_only=True)
class KernelCase:
    """A case as the report shows it: the stored case (patchkit.results.data.kernel) without the variants
    that compile to base's code, and its short form."""

    params: str
    bytes: float | None
    variants: dict[str, kernel_data.VariantTimes]  # label -> its times
    vs_base: dict[str, kernel_data.RatioVsBase]  # label -> ratio, ci_low, ci_high, verdict
    aa_ratio: float | None
    rounds: int | None = field(default=None, metadata=OMITTED)  # the rounds this case ran (adaptive timing)
    floor: float | None = field(default=None, metadata=OMITTED)  # its own A/A floor (issue 34; None: not known)
    short: str = ""


@dataclass(kw_only=True)
class KernelData:
    op: str
    params: str
    test_file: str
    rounds: int
    backend: str
    peak_bw_gbs: float | None
    labels: list[str]
    noise_floor: float
    cases: list[KernelCase]
    upstream_db: kernel_data.UpstreamDb | None = field(default=None, metadata=OMITTED)
    clocks: kernel_data.ClocksData | None = None  # GPU clocks around each process (issue 27; absent in older runs)
    hooks: dict[str, Any] | None = field(default=None, metadata=OMITTED)  # clocks, power (issue 35; older: clocks)
    max_floor: float | None = field(default=None, metadata=OMITTED)  # 'noisy' above it (issue 34; 0: no limit)


@dataclass(kw_only=True)
class KernelRun(StepRun):
    measured: KernelData | None = field(default=None, metadata=FLAT)


@dataclass(kw_only=True)
class Kernel:
    runs: list[KernelRun]
    common_params: str = ""


# ---------------------------------------------------------------------------------------------
# bench:path


@dataclass(kw_only=True)
class PathCase:
    params: str
    variants: dict[str, list[path_data.PathKernel]]  # variant -> its kernels (as stored)
    short: str = ""


@dataclass(kw_only=True)
class PathData:
    cases: list[PathCase]
    launch_count: int | None  # ncu --launch-count (None: not recorded)


@dataclass(kw_only=True)
class PathRun(StepRun):
    measured: PathData | None = field(default=None, metadata=FLAT)


@dataclass(kw_only=True)
class KernelPath:
    runs: list[PathRun]


# ---------------------------------------------------------------------------------------------
# bench:decode


@dataclass(kw_only=True)
class DecodeRow:
    """One llama-bench test of one variant (rows of older results.json files get their `test` when read,
    patchkit.results.upgrade)."""

    variant: Any
    test: str
    depth: Any
    type_k: Any
    type_v: Any
    n_gen: Any
    n_prompt: Any
    n_batch: Any
    n_ubatch: Any
    model_type: Any
    n_gpu_layers: Any
    samples_ts: Any
    avg_ts: Any
    stddev_ts: Any
    median: Any
    ci_low: Any
    ci_high: Any
    log: str | None
    logs: list[str]
    ratio: DecodeRatio | None = field(default=None, metadata=HIDDEN)  # its ratio against base (vs_base)


@dataclass(kw_only=True)
class DecodeRatio:
    variant: Any
    test: str
    depth: Any
    ratio: Any
    ci_low: Any
    ci_high: Any
    verdict: Any
    type_k: Any
    type_v: Any
    n_gen: Any
    interval: dict[str, Any] = field(default_factory=dict)  # the entry's other fields (ci_level, n, method, ...)


@dataclass(kw_only=True)
class DecodeData:
    model: dict[str, Any]
    model_path: Any
    argvs: list[list[str]]  # one per llama-bench process of a round
    rounds: Any
    rows: list[DecodeRow]
    vs_base: list[DecodeRatio]
    upstream_db: dict[str, Any] | None = field(default=None, metadata=OMITTED)  # file, labels: label -> variant
    # issue 27 (absent in older runs): interleaved rounds with an A/A copy of base, its floor, GPU clocks
    noise_floor: Any = None
    aa: list[dict[str, Any]] = field(default_factory=list)  # test, depth, ratio, ci_low, ci_high, median_ts
    aa_label: str = ""
    timing: dict[str, Any] | None = None
    rounds_run: Any = None
    clocks: dict[str, Any] | None = None
    hooks: dict[str, Any] | None = field(default=None, metadata=OMITTED)  # clocks, power (issue 35; older: clocks)
    # the real model's own cells (docs/decode-matrix.md; None: no real model named, or an older run)
    real: DecodeData | None = field(default=None, metadata=OMITTED)
    note: str | None = field(default=None, metadata=OMITTED)  # the real model's: what the series changes on it
    real_missing: str | None = field(default=None, metadata=OMITTED)  # why the named real model's cells did not run


@dataclass(kw_only=True)
class DecodeRun(StepRun):
    measured: DecodeData | None = field(default=None, metadata=FLAT)


@dataclass(kw_only=True)
class Decode:
    runs: list[DecodeRun]


# ---------------------------------------------------------------------------------------------
# numerics


@dataclass(kw_only=True)
class Pair:
    a: str
    b: str
    identical: bool
    generations: list[numerics_data.Generation]  # as stored, logs from the report's folder, older keys filled
    kld: dict[str, float | str] | None  # the stored Kld's keys holding a value (mean, p99, ..., log or error)


@dataclass(kw_only=True)
class NumericsData:
    pairs: list[Pair]
    depths: list[int]
    prompts: list[str]
    n_predict: int
    model: str = ""  # its label (measure.model.label): a real model's GGUF metadata, or synthetic and its shape
    shape: str = ""  # the attention it exercises, from the model's header (measure.model.shape_line)
    shape_from: str = ""  # ', from its GGUF header' for a real model (the synthetic one's is its spec)
    licence: str = ""  # a real model's licence
    text: str = ""  # where the long-depth prefix and the KL divergence's text came from
    # why the runs kept the weights as the file has them (measure.tool.repack_off); None: they did not
    repack_off: str | None = field(default=None, metadata=OMITTED)
    same_code: dict[str, str] = field(default_factory=dict)  # measured variants that compile to base's code: why


@dataclass(kw_only=True)
class NumericsRun(StepRun):
    measured: NumericsData | None = field(default=None, metadata=FLAT)


@dataclass(kw_only=True)
class Numerics:
    runs: list[NumericsRun]


# ---------------------------------------------------------------------------------------------
# Per-patch attribution


@dataclass(kw_only=True)
class AttributionRow:
    gpu: str
    patch: str
    without: str
    with_: str = field(metadata={"key": "with"})
    kind: str  # kernel or decode
    what: str
    unit: str
    value_without: Any
    value_with: Any
    ratio: float
    ci_low: float
    ci_high: float
    verdict: str
    source: str  # stored or computed
    n: list[int] = field(default_factory=list)  # samples without, with
    interval: dict[str, Any] = field(default_factory=dict)  # the ratio's other fields (ci_level, n, method, ...)


@dataclass(kw_only=True)
class AttributionMissing:
    gpu: str
    patch: str
    without: str
    with_: str = field(metadata={"key": "with"})
    reason: str


@dataclass(kw_only=True)
class Attribution:
    patches: list[str]
    rows: list[AttributionRow] = field(default_factory=list)
    missing: list[AttributionMissing] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The whole evidence


@dataclass(kw_only=True)
class Evidence:
    recipe: Any
    variants: list[str]
    runs: list[RunInfo]
    merge_problems: list[str]
    patches: list[Patch]
    prose: Prose
    hardware: list[Hardware]
    builds: list[BuildsRun]
    # each step section's evidence by its slot (tests, kernel, kernel_path, occupancy, decode, numerics),
    # read as attributes (ev.kernel); in the JSON, one key per slot
    parts: dict[str, Any] = field(default_factory=dict, metadata=FLAT)
    attribution: Attribution = field(default_factory=lambda: Attribution(patches=[]))
    not_tested: list[str] = field(default_factory=list)
    missing_logs: list[str] = field(default_factory=list)
    plot: str | None = None
    plot_ubatch: str | None = field(default=None, metadata=OMITTED)  # the matrix's speedup by micro-batch
    report_schema: int = REPORT_SCHEMA

    def __getattr__(self, name: str) -> Any:
        """A step section's evidence (Evidence.parts) as an attribute: ev.kernel, ev.decode, ..."""
        parts = self.__dict__.get("parts") or {}
        if name in parts:
            return parts[name]
        raise AttributeError(f"{type(self).__name__} has no {name!r} (step sections: {', '.join(parts)})")

    @property
    def multi(self) -> bool:
        """Several runs merged (tables get a GPU column)."""
        return len(self.runs) > 1

    def to_json(self) -> str:
        return json.dumps(to_data(self), indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"


def to_data(o: Any) -> Any:
    """The JSON value of evidence (see the module docstring)."""
    if isinstance(o, Data):  # stored step data: as results.json holds it
        return to_data(o.to_dict())
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(o):
            v, how = getattr(o, f.name), f.metadata.get("json")
            if how == "hidden":
                continue
            if how == "flat":
                out.update(to_data(v) if v is not None else {})
            elif how != "omitted" or v is not None:
                out[f.metadata.get("key", f.name)] = to_data(v)
        return out
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: to_data(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [to_data(v) for v in o]
    return o
