"""Step `bench:occupancy`: occupancy and memory traffic per launch of the kernel-path cases (ncu), and
the self-check of patchkit.measure.occupancy_formula against ncu's own blocks per SM.

Per variant and case (the cases `bench:path` profiles: bench:kernel's timed cases that match the
recipe's path-params), one `ncu --metrics <METRICS>` run (only the metrics the step reads; the four
sections LaunchStats, Occupancy, SpeedOfLight, MemoryWorkloadAnalysis where this ncu refuses a name) over
the first launches of the case (one run per case: a
test-backend-ops process that runs several cases launches hundreds to thousands of kernels per case, so
a launch count cannot be shared between cases). GGML_TEST_PERF_MIN_US=0 (patches/local/0002) keeps the
unprofiled rest of the case short. ncu replays each kernel with flushed caches: its durations explain
(shares, DRAM %), bench:kernel times.

Self-check: patchkit.measure.occupancy_formula.occupancy() on each profiled launch (registers, block size, shared
memory as ncu printed them) with the limits of ncu's compute capability and ncu's carveout
(launch__shared_mem_config_size) must give ncu's blocks per SM (the least of its limits); a launch where
it does not is listed and the step fails.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends, parsers, proc
from patchkit.errors import OptionError, ParseError, ToolNotFound
from patchkit.measure import occupancy_formula as occ
from patchkit.measure import reuse
from patchkit.measure.kernel import MIN_US_ENV
from patchkit.measure.kind import Resource, StepKind, one
from patchkit.measure.path import exact_params_regex
from patchkit.measure.tool import Bins, Built, completed_from_log, run_logged
from patchkit.options import RunOptions
from patchkit.parsers.ncu import LaunchStats
from patchkit.results import Bundle, Status, Step
from patchkit.results.data.base import ABSENT, Data, StepData
from patchkit.results.data.kernel import KernelData

# ---------------------------------------------------------------------------------------------
# Its stored data (Step.data, the kind's StepData; docs/results-schema.md): occupancy and memory traffic per
# profiled launch (ncu), and the formula's self-check (docs/occupancy.md). Predictions are not stored: the report
# computes them from this and the check steps' `kernels`


@dataclass(kw_only=True)
class Cliff(Data):
    """How far the launch is from one block per SM more or less (patchkit.measure.occupancy_formula.cliff)."""

    blocks_per_sm: int  # at the default carveout preference
    registers_to_one_less: int | None  # registers per thread at which one block fewer fits (None: none)
    registers_to_one_more: int | None
    shared_memory_to_one_less: int | None  # bytes of shared memory per block
    shared_memory_to_one_more: int | None


@dataclass(kw_only=True)
class Formula(Data):
    """patchkit.measure.occupancy_formula on the launch as ncu measured it; only `error` where it could not."""

    blocks_per_sm: int = ABSENT
    limiter: str = ABSENT  # the limiting resource
    limits: dict[str, int] = ABSENT  # resource -> blocks per SM it allows
    theoretical_pct: float = ABSENT
    carveout: int | None = ABSENT  # the shared memory carveout used (bytes)
    waves: float | None = ABSENT
    cliff: Cliff = ABSENT
    error: str = ABSENT  # why the formula was not applied (the launch lacks a metric, the cc is not known)


@dataclass(kw_only=True)
class Launch(Data):
    """One profiled launch (patchkit.parsers.ncu.LaunchStats; None: ncu printed no such metric)."""

    id: int  # ncu's launch ID
    kernel_name: str
    duration_ns: float
    grid: list[int] | None
    block: list[int] | None
    cc: str  # compute capability ncu reports ('9.0')
    process_id: int | None
    registers: float | None  # per thread
    block_size: float | None
    grid_size: float | None
    smem_static: float | None  # bytes per block
    smem_dynamic: float | None
    smem_driver: float | None
    smem_config: float | None  # the carveout the driver picked
    sm_count: float | None
    limit_registers: float | None  # ncu's blocks per SM by each resource
    limit_shared_mem: float | None
    limit_warps: float | None
    limit_blocks: float | None
    theoretical_pct: float | None
    achieved_pct: float | None
    waves: float | None
    dram_pct: float | None
    dram_bytes: float | None
    l2_hit_pct: float | None
    flagged: list[str]  # values that cannot be, kept as printed and named here
    line: int  # of the log
    blocks_per_sm: int | None  # ncu's: the least of its limits
    limiters: list[str]  # the resources at that least
    formula: Formula
    selfcheck: str  # ok / mismatch / error: the formula's blocks per SM against ncu's


@dataclass(kw_only=True)
class OccupancyVariant(Data):
    """One variant's ncu run over one case."""

    launches: list[Launch]
    ops: int  # whole repetitions of one op's launch sequence among the launches (the report flags fewer than 2)
    log: str  # relative to the run folder


@dataclass(kw_only=True)
class OccupancyCase(Data):
    params: str  # the case as test-backend-ops prints it
    launch_count: int  # ncu --launch-count
    variants: dict[str, OccupancyVariant]  # variant -> its run (absent: ncu failed)


@dataclass(kw_only=True)
class OccupancyData(StepData):
    """bench:occupancy. A step that did not run holds only `inputs`."""

    KIND = "bench:occupancy"
    backend: str = ABSENT  # the device a replay resolved (patchkit.run.replay; the runner profiles CUDA0)
    cases: list[OccupancyCase] = ABSENT  # absent: nothing profiled
    env: dict[str, str] = ABSENT  # the environment of the profiled processes (GGML_TEST_PERF_MIN_US=0)
    reused_from: dict[str, str] = ABSENT  # '<variant> case <i>' -> the run whose log was reused (absent: none)
    target_gpus: list[str] = ABSENT  # the GPUs the report predicts occupancy on (recipe's target-gpus)

    @property
    def measured(self) -> bool:
        return self.cases is not ABSENT


NAME = "bench:occupancy"
# the metrics the step reads (parsers.ncu.OCC_METRICS, by the names ncu's sections print them on the H200) and
# nothing else: the four sections' other metrics cost replay passes (11 per kernel with the sections; the
# launch__ ones cost none) that nothing reads
METRICS = ",".join(
    (
        "launch__registers_per_thread,launch__block_size,launch__grid_size,launch__shared_mem_per_block_static",
        "launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_driver,launch__shared_mem_config_size",
        "launch__sm_count,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem",
        "launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__waves_per_multiprocessor",
        "sm__maximum_warps_per_active_cycle_pct,sm__warps_active.avg.pct_of_peak_sustained_active",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,lts__t_sector_hit_rate.pct",
        "gpu__time_duration.sum",
    )
)
# the fallback where this ncu refuses a metric name: the sections that print them all (as recorded first)
SECTIONS = ("LaunchStats", "Occupancy", "SpeedOfLight", "MemoryWorkloadAnalysis")
SECTION_METRICS = "dram__bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"
# the first 8 launches of each case: two ops where an op launches 4 kernels (+0001's dequantize x2, f16, fixup),
# four of base's (vec, combine); each run's `ops` says how many whole ops it held (the report flags fewer than 2)
LAUNCH_COUNT = 8
ENV = {MIN_US_ENV: "0"}  # one timed graph after the warm-up: the profiled launches are the warm-up's first


def ncu_argv(b: Bins, *, backend: str, op: str, params: str, launch_count: int, sections: bool = False) -> list:
    argv: list = ["ncu", "--clock-control", "none", "--csv", "--print-units", "base", "--print-metric-name", "name"]
    for s in SECTIONS if sections else ():
        argv += ["--section", s]
    argv += ["--metrics", SECTION_METRICS if sections else METRICS]
    argv += ["--launch-count", str(launch_count), b.exe("test-backend-ops")]
    return [*argv, "perf", "-b", backend, "-o", op, "-p", exact_params_regex(params)]


def refused_metric(log: Path) -> bool:
    """Whether ncu refused a metric name of the list (an older or newer ncu may lack one): its ==ERROR==
    line names the metric."""
    text = "".join(f.read_text(errors="replace") for f in (log, proc.stderr_log(log)) if f.is_file())
    return any(ln.startswith("==ERROR==") and "metric" in ln.lower() for ln in text.splitlines())


def _profile(bundle: Bundle, b: Bins, i: int, argv: list, cache: Path | None, timeout: float):
    """(launches or None, why, log, reused-from) of one variant and case: ncu, or the log of the same
    binary profiled the same way before (by build key)."""
    exe_at = argv.index(b.exe("test-backend-ops"))
    args = [str(a) for a in argv[:exe_at] + argv[exe_at + 1 :]]
    f = reuse.finished(cache, b.key, "ncu-occupancy", (*args, str(ENV)))
    name = f"ncu-occ-case{i}-{b.variant}"
    if (hit := f.take(bundle, name)) is not None:
        (log, origin), done, why = hit, completed_from_log(hit[0]), ""
    else:
        done, why, log = run_logged(bundle, name, argv, timeout=timeout, env=ENV, separate_stderr=True)
        if why and "--section" not in argv and refused_metric(log):
            print(f"[{NAME}] ncu refused a metric name ({bundle.rel(log)}): profiling with the sections instead")
            argv = _with_sections(argv)
            done, why, log = run_logged(
                bundle, f"{name}-sections", argv, timeout=timeout, env=ENV, separate_stderr=True
            )
        origin = ""
    if why or done is None:
        return None, why or "no output", log, origin
    try:
        launches = parsers.parse_ncu_occupancy(done.stdout, str(log))
    except ParseError as e:
        return None, str(e), log, origin
    if not origin:
        f.keep(bundle, log)
    return launches, "", log, origin


def _with_sections(argv: list) -> list:
    """The same ncu command with the four sections (and their extra metrics) instead of the metric list."""
    i = argv.index("--metrics")
    return [*argv[:i], *(a for s in SECTIONS for a in ("--section", s)), "--metrics", SECTION_METRICS, *argv[i + 2 :]]


def formula(k: LaunchStats) -> dict:
    """patchkit.measure.occupancy_formula on the launch as ncu measured it, with ncu's cc and carveout; {'error': why}
    when the launch lacks what the formula needs or its cc is unknown."""
    need = {"registers": k.registers, "block_size": k.block_size, "smem_static": k.smem_static}
    need["smem_dynamic"] = k.smem_dynamic
    if lack := [n for n, v in need.items() if v is None]:
        return {"error": f"ncu printed no {', '.join(lack)}"}
    try:
        lim = occ.limits(k.cc)
        o = occ.occupancy(
            launch(k),
            lim,
            carveout=int(k.smem_config) if k.smem_config is not None else None,
            sms=int(k.sm_count) if k.sm_count else None,
        )
    except OptionError as e:
        return {"error": str(e)}
    return {
        "blocks_per_sm": o.blocks_per_sm,
        "limiter": o.limiter,
        "limits": o.limits,
        "theoretical_pct": round(100 * o.theoretical, 2),
        "carveout": o.carveout,
        "waves": o.waves,
        # the driver picks the carveout per launch: a cliff at ncu's carveout would say nothing of a launch
        # with more shared memory, so the cliff is at the default preference (occupancy_formula's docstring)
        "cliff": occ.cliff(launch(k), lim),
    }


def launch(k: LaunchStats | Launch) -> occ.Launch:
    """The formula's launch of a measured one (a LaunchStats or the stored Launch)."""
    return occ.Launch(
        registers=int(k.registers),
        threads=int(k.block_size),
        smem_static=int(k.smem_static),
        smem_dynamic=int(k.smem_dynamic),
        grid=int(k.grid_size) if k.grid_size is not None else None,
    )


def launch_record(k: LaunchStats) -> Launch:
    """A launch as stored: ncu's fields, its blocks per SM and limiters, the formula's answer and whether
    they agree."""
    d = k.to_dict()
    d["grid"], d["block"] = (list(d[x]) if d[x] is not None else None for x in ("grid", "block"))
    d["blocks_per_sm"], d["limiters"] = k.blocks_per_sm, list(k.limiters)
    f = formula(k)
    d["formula"] = f
    d["selfcheck"] = "error" if "error" in f else ("ok" if f["blocks_per_sm"] == k.blocks_per_sm else "mismatch")
    return Launch.from_dict(d, f"{NAME}: launch {k.id}")


def _ops(names: list[str]) -> int:
    """How many whole repetitions of one op's launch sequence the profiled launches hold (the shortest
    period of the kernel names; 1 when they do not repeat)."""
    n = len(names)
    for p in range(1, n // 2 + 1):
        if all(names[j] == names[j + p] for j in range(n - p)):
            return n // p
    return 1


def run_occupancy(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    cases: list[str],
    counts: list[int],
    timeout: float = 600,
    cache: Path | None = None,
) -> Step:
    t0 = time.monotonic()
    try:
        if not bundle.replay:
            proc.which("ncu")
    except ToolNotFound as e:
        return Step(name=NAME, status=Status.NOT_RUN, reason=f"ncu (Nsight Compute) not available: {e}")
    out_cases: list[OccupancyCase] = []
    logs, errors, reused = [], [], {}
    for i, (p, n) in enumerate(zip(cases, counts)):
        per: dict[str, OccupancyVariant] = {}
        for b in bins:
            argv = ncu_argv(b, backend=backend, op=op, params=p, launch_count=n)
            launches, why, log, origin = _profile(bundle, b, i, argv, cache, timeout)
            logs.append(bundle.rel(log))
            if origin:
                reused[f"{b.variant} case {i}"] = origin
            if launches is None:
                errors.append(f"{b.variant} case {i}: {why}")
                continue
            per[b.variant] = OccupancyVariant(
                launches=[launch_record(k) for k in launches],
                ops=_ops([k.kernel_name for k in launches]),
                log=bundle.rel(log),
            )
        out_cases.append(OccupancyCase(params=p, launch_count=n, variants=per))
    bad = [
        f"{v} case {i} launch {k.id}"
        for i, c in enumerate(out_cases)
        for v, d in c.variants.items()
        for k in d.launches
        if k.selfcheck != "ok"
    ]
    if bad:
        errors.append(f"self-check: the formula's blocks per SM differ from ncu's for {len(bad)} launch(es): {bad[0]}")
    some = any(c.variants for c in out_cases)
    status = Status.ERROR if errors and not some else (Status.FAIL if errors else Status.OK)
    return Step(
        name=NAME,
        status=status,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=OccupancyData(cases=out_cases, env=dict(ENV), reused_from=reused or ABSENT).to_dict(),
    )


def cases_of(built: Built, opts: RunOptions) -> list[str]:
    """The kernel-path cases: bench:kernel's timed cases matching the recipe's path-params (as bench:path)."""
    kb = KernelData.in_bundle(built.bundle)
    cases = kb.case_params if kb else []
    if opts.kernel.path_params:
        cases = [c for c in cases if re.search(opts.kernel.path_params, c)]
    return cases


def step(built: Built, opts: RunOptions, name: str) -> Step:
    if not backends.get(built.backend).kernels:
        return Step(name=name, status=Status.NOT_RUN, reason="occupancy needs a CUDA build and ncu")
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    cases = cases_of(built, opts)
    if not cases:
        return Step(name=name, status=Status.NOT_RUN, reason="no kernel cases (bench:kernel did not run)")
    cache = built.ctx.ws.cache / "measure" if opts.reuse else None
    s = run_occupancy(
        built.bundle,
        built.measured,
        backend=opts.device,
        op=opts.kernel.op,
        cases=cases,
        counts=[LAUNCH_COUNT] * len(cases),  # fixed: bench:path may still be running beside this step
        cache=cache,
    )
    s.data["target_gpus"] = list(opts.kernel.target_gpus)
    return s


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    return {"op": opts.kernel.op, "path_params": opts.kernel.path_params, "target_gpus": list(opts.kernel.target_gpus)}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = OccupancyData.from_step(old, str(bundle.path / "results.json"))
    cs = d.cases or []
    profiled = {v for c in cs for v in c.variants}  # not those that compile to base's code
    s = run_occupancy(
        bundle,
        [b for b in bins if b.variant in profiled],
        backend=backends.CUDA.device,
        op="FLASH_ATTN_EXT",
        cases=[c.params for c in cs],
        counts=[c.launch_count for c in cs],
    )
    s.data["target_gpus"] = list(d.target_gpus or [])
    return s


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="bench:occupancy",
    help="occupancy, DRAM and L2 per launch of the kernel-path cases (ncu sections), self-checked",
    resource=Resource.GPU,
    names=one("bench:occupancy"),
    # DRAM % and bytes are counted device-wide and durations share the SMs: the other GPU steps are held while
    # it runs; the CPU lane is not (ncu replays each kernel and reads GPU counters and GPU clocks)
    timing=True,
    warm_after=("test",),
    holds_cpu=False,
    after=("bench:kernel",),  # the cases it timed
    tools=("test-backend-ops",),
    tables=("bench.kernel",),  # its op and params select the cases
    run=step,
    inputs=inputs,
    data=OccupancyData,
    reparse=reparse,
)
