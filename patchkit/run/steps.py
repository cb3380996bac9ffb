"""The one registry of measurement steps, in pipeline order (nox's literal task tuple is the model).

Each step is one `StepKind`: its name (used by the CLI, `--skip`, `reparse`, `import`, results.json
and the report), the resource it holds, the step names it expands to, its runner, the inputs its
result depends on, its reparse from raw logs, what `patchkit import` can feed it (all from its module in
patchkit/measure/), and its part of the report (`SECTION` of its module in patchkit/report/: evidence,
markdown section, "Not tested" lines). Adding a step = those two modules and one entry here; the report's
sections, its "Not tested" list, `patchkit bench`'s choices and `--skip` follow from this table.

Fetch, apply and build come before every step (patchkit.run.pipeline); `build:<config>` is recorded
like a step but is not in this table because every step needs it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import patchkit.report.check as check_report
import patchkit.report.decode as decode_report
import patchkit.report.kernel as kernel_report
import patchkit.report.numerics as numerics_report
import patchkit.report.occupancy as occupancy_report
import patchkit.report.path as path_report
import patchkit.report.test as test_report
from patchkit.errors import OptionError
from patchkit.measure import check, decode, kernel, numerics, occupancy, path, tests
from patchkit.measure.tool import Bins, Built
from patchkit.options import RunOptions
from patchkit.recipe import Recipe, _hint
from patchkit.report.part import Section
from patchkit.results import Bundle, Step


class Resource(str, enum.Enum):
    CPU = "cpu"  # compiles: may overlap with GPU work
    GPU = "gpu"  # runs kernels: one at a time, never beside another GPU step

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class ImportSpec:
    """What `patchkit import --tool TOOL` turns into this step: the raw log name of each log."""

    tool: str
    log: str  # format string with {round}, {variant}, {suite}


@dataclass(frozen=True, kw_only=True)
class StepKind:
    name: str  # the kind: "test", "bench:kernel", ...
    help: str
    resource: Resource
    names: Callable[[Recipe, RunOptions], tuple[str, ...]]  # the step names this kind runs as
    run: Callable[[Built, RunOptions, str], Step]
    inputs: Callable[[Built, RunOptions, str], dict]
    reparse: Callable[[Bundle, Step, list[Bins]], Step] | None = None
    imports: ImportSpec | None = None
    # its part of the report (report/<kind>.py: evidence, markdown, "Not tested" lines); every kind of STEPS
    # has one (tests/unit/test_steps.py); None only for the pipeline's fake kinds in tests
    report: Section | None = None
    timing: bool = False  # it times kernels: the CPU lane's steps are held while it runs (patchkit.run.pipeline)
    # a timing step whose numbers are GPU counters and GPU clocks of replayed kernels (ncu): False lets the
    # CPU lane go on (the other GPU steps are still held); CPU load stretches the step, not its numbers
    holds_cpu: bool = True
    after: tuple[str, ...] = ()  # steps it reads, run first when the same command runs them
    # with --changed (the warm loop: the answer first), the kinds whose steps end before this one starts: the
    # kernel verdict, then correctness (the affected tests), then the rest (issue 37)
    warm_after: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # the programs it runs: `[build] targets` must build them (else: not run)
    tables: tuple[str, ...] = ()  # the recipe tables that ask for it (else: not run, never on defaults)
    model: bool = False  # it runs a model: the recipe's [model] (synthetic) or bench.decode.model / --model

    @property
    def report_section(self) -> str:
        return self.report.kind if self.report else ""

    def owns(self, step_name: str) -> bool:
        """Whether `step_name` (e.g. test:flash_attn) is an instance of this kind."""
        return step_name == self.name or step_name.startswith(self.name + ":")


def _one(kind: str) -> Callable[[Recipe, RunOptions], tuple[str, ...]]:
    return lambda recipe, opts: (kind,)


STEPS: tuple[StepKind, ...] = (
    StepKind(
        name="check",
        help="compile the touched translation units for each --check-arch (CUDA, no GPU needed)",
        resource=Resource.CPU,
        names=lambda recipe, opts: tuple(check.instance(a) for a in opts.check_archs),
        run=check.step,
        inputs=check.inputs,
        report=check_report.SECTION,
    ),
    StepKind(
        name="test",
        help="test-backend-ops test mode on every variant, one step per recipe suite (test:<suite>)",
        resource=Resource.GPU,
        names=lambda recipe, opts: tuple(f"test:{s}" for s in opts.test.suites),
        tools=("test-backend-ops",),
        run=tests.step,
        inputs=tests.inputs,
        report=test_report.SECTION,
        reparse=tests.reparse,
        imports=ImportSpec(tool="test-backend-ops", log="test-{suite}-{variant}"),
    ),
    StepKind(
        name="bench:kernel",
        help="kernel timing: test-backend-ops perf, variants interleaved with an A/A copy of base",
        resource=Resource.GPU,
        names=_one("bench:kernel"),
        timing=True,
        tools=("test-backend-ops",),
        tables=("bench.kernel",),  # its op and params select the cases
        run=kernel.step,
        inputs=kernel.inputs,
        report=kernel_report.SECTION,
        reparse=kernel.reparse,
        imports=ImportSpec(tool="perf-sql", log="perf-r{round}-{variant}"),
    ),
    StepKind(
        name="bench:path",
        help="the CUDA kernels each variant launches per timed case (ncu)",
        resource=Resource.GPU,
        names=_one("bench:path"),
        after=("bench:kernel",),  # the cases it timed
        tools=("test-backend-ops",),
        tables=("bench.kernel",),  # its op and params select the cases
        run=path.step,
        inputs=path.inputs,
        report=path_report.SECTION,
        reparse=path.reparse,
    ),
    StepKind(
        name="bench:occupancy",
        help="occupancy, DRAM and L2 per launch of the kernel-path cases (ncu sections), self-checked",
        resource=Resource.GPU,
        names=_one("bench:occupancy"),
        # DRAM % and bytes are counted device-wide and durations share the SMs: the other GPU steps are held while
        # it runs; the CPU lane is not (ncu replays each kernel and reads GPU counters and GPU clocks)
        timing=True,
        warm_after=("test",),
        holds_cpu=False,
        after=("bench:kernel",),  # the cases it timed
        tools=("test-backend-ops",),
        tables=("bench.kernel",),  # its op and params select the cases
        run=occupancy.step,
        inputs=occupancy.inputs,
        report=occupancy_report.SECTION,
        reparse=occupancy.reparse,
    ),
    StepKind(
        name="bench:decode",
        help="decode throughput: llama-bench per variant and depth",
        resource=Resource.GPU,
        names=_one("bench:decode"),
        timing=True,
        warm_after=("test",),
        tools=("llama-bench",),
        tables=("bench.decode",),
        model=True,
        run=decode.step,
        inputs=decode.inputs,
        report=decode_report.SECTION,
        reparse=decode.reparse,
        imports=ImportSpec(tool="llama-bench", log="decode-r{round}-{variant}"),
    ),
    StepKind(
        name="numerics",
        help="greedy generations and KL divergence against base",
        resource=Resource.GPU,
        names=_one("numerics"),
        tools=("llama-completion", "llama-perplexity"),
        tables=("numerics",),
        model=True,
        run=numerics.step,
        inputs=numerics.inputs,
        report=numerics_report.SECTION,
    ),
)

BY_NAME = {k.name: k for k in STEPS}
IMPORT_TOOLS = {k.imports.tool: k for k in STEPS if k.imports}


def kind_of(step_name: str) -> StepKind:
    """The kind a step name belongs to (test:flash_attn -> test)."""
    for k in STEPS:
        if k.owns(step_name):
            return k
    raise OptionError(f"no step {step_name!r} (steps: {', '.join(k.name for k in STEPS)})")


def unmet(kind: StepKind, recipe: Recipe, opts: RunOptions) -> str:
    """Why a step is not run here ('' when it can run): the recipe does not ask for it (a table of
    `kind.tables` is missing: no step runs on defaults), or `[build] targets` do not build its program."""
    for t in kind.tables:
        if not recipe.has(t):
            return f"the recipe has no [{t}]"
    if kind.model and not opts.decode.model and not recipe.has("model"):
        return "no model: the recipe has no [model] (a synthetic model) and no bench.decode.model (--model)"
    lack = [t for t in kind.tools if t not in opts.build.targets]
    if lack:
        return f"the recipe's [build] targets do not build {' and '.join(lack)}"
    return ""


def check_names(names: tuple[str, ...], what: str) -> None:
    """Refuse unknown step names in --skip/--step with the list of the known ones."""
    for n in names:
        try:
            kind_of(n)
        except OptionError:
            raise OptionError(f"{what} {n}: no such step (steps: {', '.join(k.name for k in STEPS)})") from None


def check_instances(names: tuple[str, ...], what: str, recipe: Recipe, opts: RunOptions) -> None:
    """Refuse a step instance (`test:flash-attn`) that the recipe and options do not make: a misspelt
    --skip would otherwise skip nothing, silently."""
    for n in names:
        kind = kind_of(n)
        if n == kind.name:
            continue
        known = set(kind.names(recipe, opts)) | ({f"test:{s}" for s in recipe.suites} if kind.name == "test" else set())
        if n not in known:
            hint = _hint(n, known) if known else f" (this run makes no {kind.name} step)"
            raise OptionError(f"{what} {n}: the recipe {recipe.name} makes no such step{hint}")


def bench_steps() -> dict[str, tuple[str, ...]]:
    """`patchkit bench WHAT`: each `bench:<what>` kind, with the steps it reads (`after`) run first."""
    return {k.name.split(":", 1)[1]: (*k.after, k.name) for k in STEPS if k.name.startswith("bench:")}
