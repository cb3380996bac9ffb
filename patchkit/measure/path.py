"""Step `bench:path`: the CUDA kernels each variant launches per timed case (ncu)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends, parsers, proc
from patchkit.errors import ResultsError, ToolNotFound
from patchkit.measure import reuse
from patchkit.measure.kind import Resource, StepKind, one
from patchkit.measure.tool import Bins, Built, completed_from_log, run_parsed
from patchkit.options import RunOptions
from patchkit.results import Bundle, Status, Step
from patchkit.results.data.base import ABSENT, Data, StepData
from patchkit.results.data.kernel import KernelData

# ---------------------------------------------------------------------------------------------
# Its stored data (Step.data, the kind's StepData; docs/results-schema.md): the kernels each variant launches per
# case


@dataclass(kw_only=True)
class PathKernel(Data):
    """One kernel of a case under one variant, its launches summed (patchkit.parsers.summarize_kernels)."""

    name: str  # as Nsight Compute prints it (demangled, with its parameters)
    count: int  # launches among the profiled ones
    total_ns: float  # their summed gpu__time_duration
    share: float  # total_ns / all profiled kernel time of the case and variant (0..1)


@dataclass(kw_only=True)
class PathCase(Data):
    """One bench:kernel case profiled under each variant (ncu over test-backend-ops perf)."""

    params: str  # the case as test-backend-ops prints it
    variants: dict[str, list[PathKernel]]  # variant -> its kernels, largest total first (absent: ncu failed)


@dataclass(kw_only=True)
class PathData(StepData):
    """bench:path. A step that did not run (no ncu, no cases) holds only `inputs`."""

    KIND = "bench:path"
    backend: str = ABSENT  # test-backend-ops -b (absent: bench:kernel's; a replay records the resolved device)
    op: str = ABSENT  # the ggml op (absent: bench:kernel's)
    cases: list[PathCase] = ABSENT  # absent: the step profiled nothing
    launch_count: int = ABSENT  # ncu --launch-count: the first launches profiled per variant and case
    reused_from: dict[str, str] = ABSENT  # '<variant> case <i>' -> the run whose log was reused (absent: none)

    @property
    def measured(self) -> bool:
        return self.cases is not ABSENT


# ---------------------------------------------------------------------------------------------
# Kernel path: which kernels each variant launches for each case (Nsight Compute)


def exact_params_regex(params: str) -> str:
    return "^" + re.escape(params) + "$"


def _ncu_argv(b: Bins, backend: str, op: str, params: str, launch_count: int) -> list:
    """ncu over test-backend-ops perf for the one case `params` (matched exactly)."""
    return [
        "ncu",
        "--clock-control",
        "none",
        "--csv",
        "--print-units",
        "base",
        "--metrics",
        "gpu__time_duration.sum",
        "--launch-count",
        str(launch_count),
        b.exe("test-backend-ops"),
        "perf",
        "-b",
        backend,
        "-o",
        op,
        "-p",
        exact_params_regex(params),
    ]


def _case_launches(
    bundle: Bundle,
    b: Bins,
    i: int,
    argv: list,
    *,
    cache: Path | None,
    reused: dict[str, str],
    logs: list,
    errors: list,
    timeout: float,
) -> list | None:
    """Case i's kernel launches under variant b: reused from `cache` where profiled so before, else
    profiled now (and kept in `cache`); None, with the reason in `errors`, where that failed."""
    f = reuse.finished(cache, b.key, "ncu", tuple(str(a) for a in argv[:10] + argv[11:]))
    if (hit := f.take(bundle, f"ncu-case{i}-{b.variant}")) is not None:  # profiled so before: its log
        log, reused[f"{b.variant} case {i}"] = hit
        logs.append(bundle.rel(log))
        return parsers.parse_ncu_csv(completed_from_log(log).stdout, str(log))
    launches = run_parsed(
        bundle,
        f"ncu-case{i}-{b.variant}",
        argv,
        parsers.parse_ncu_csv,
        errors,
        f"{b.variant} case {i}",
        logs,
        timeout=timeout,
        separate_stderr=True,
    )
    if launches is not None:
        f.keep(bundle, bundle.path / logs[-1])
    return launches


def run_kernel_path(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    cases: list[str],
    launch_count: int = 40,
    timeout: float = 600,
    cache: Path | None = None,
) -> Step:
    """The kernels each variant launches for each case (ncu); a (binary, case) profiled before is
    reused from `cache` (patchkit.measure.reuse) and the step says from which run."""
    t0 = time.monotonic()
    reused: dict[str, str] = {}
    try:
        if not bundle.replay:
            proc.which("ncu")
    except ToolNotFound as e:
        return Step(name="bench:path", status=Status.NOT_RUN, reason=f"ncu (Nsight Compute) not available: {e}")
    out_cases: list[PathCase] = []
    logs, errors = [], []
    for i, p in enumerate(cases):
        per: dict[str, list[PathKernel]] = {}
        for b in bins:
            argv = _ncu_argv(b, backend, op, p, launch_count)
            with proc.unstoppable():  # a hold waits for this ncu to end: stopped midway, it blocked the next ncu
                launches = _case_launches(
                    bundle, b, i, argv, cache=cache, reused=reused, logs=logs, errors=errors, timeout=timeout
                )
            if launches is None:
                continue
            per[b.variant] = [
                PathKernel(name=k.name, count=k.count, total_ns=k.total_ns, share=k.share)
                for k in parsers.summarize_kernels(launches)
            ]
        out_cases.append(PathCase(params=p, variants=per))
    status = (
        Status.ERROR if errors and not any(c.variants for c in out_cases) else (Status.FAIL if errors else Status.OK)
    )
    return Step(
        name="bench:path",
        status=status,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=PathData(cases=out_cases, launch_count=launch_count, reused_from=reused or ABSENT).to_dict(),
    )


def step(built: Built, opts: RunOptions, name: str) -> Step:
    """Kernel names of the cases `bench:kernel` timed (those matching the recipe's path_params)."""
    if not backends.get(built.backend).kernels:
        return Step(name=name, status=Status.NOT_RUN, reason="kernel names need a CUDA build and ncu")
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    kb = KernelData.in_bundle(built.bundle)
    cases = kb.case_params if kb else []
    if not cases:
        return Step(name=name, status=Status.NOT_RUN, reason="no kernel cases (bench:kernel did not run)")
    if opts.kernel.path_params:
        cases = [c for c in cases if re.search(opts.kernel.path_params, c)]
    cache = built.ctx.ws.cache / "measure" if opts.reuse else None
    return run_kernel_path(
        built.bundle, built.measured, backend=opts.device, op=opts.kernel.op, cases=cases, cache=cache
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    return {"op": opts.kernel.op, "path_params": opts.kernel.path_params}


def recorded_target(bundle: Bundle, d: PathData) -> tuple[str, str]:
    """(test-backend-ops device, op) a step profiled: its own record where it has one, else that of the
    bench:kernel step whose cases it took (bench:path runs on those cases, with that device and op)."""
    kd = KernelData.in_bundle(bundle) or KernelData()
    backend, op = d.backend or kd.backend, d.op or kd.op
    if not backend or not op:
        raise ResultsError(f"{bundle.path}: bench:path: no recorded device and op (nor a bench:kernel step's)")
    return backend, op


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = PathData.from_step(old, str(bundle.path / "results.json"))
    backend, op = recorded_target(bundle, d)
    return run_kernel_path(
        bundle,
        bins,
        backend=backend,
        op=op,
        cases=[c.params for c in d.cases or []],
        launch_count=d.launch_count or 40,
    )


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="bench:path",
    help="the CUDA kernels each variant launches per timed case (ncu)",
    resource=Resource.GPU,
    names=one("bench:path"),
    after=("bench:kernel",),  # the cases it timed
    tools=("test-backend-ops",),
    tables=("bench.kernel",),  # its op and params select the cases
    run=step,
    inputs=inputs,
    data=PathData,
    reparse=reparse,
)
