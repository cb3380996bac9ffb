"""What a step kind declares about itself: `StepKind`, the `STEP` at the end of its runner module
(patchkit/measure/<kind>.py). The registry (patchkit.registry.KINDS: one name per kind, in pipeline order)
lists the modules; patchkit.run.steps pairs each `STEP` with its report module's `SECTION`
(patchkit/report/<kind>.py). Nothing here imports a kind, the report or the run stage.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from patchkit.measure.tool import Bins, Built
from patchkit.options import RunOptions
from patchkit.recipe import Recipe
from patchkit.results import Bundle, Step
from patchkit.results.data.base import StepData


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
    # its stored data (a StepData class with KIND): docs/results-schema.md is generated from it; None only for
    # the pipeline's fake kinds in tests
    data: type[StepData] | None = None
    # its part of the report: patchkit.report.part.Section, the SECTION of report/<kind>.py, set by the registry
    # (patchkit.run.steps; the runner does not import the report); None only for fake kinds in tests
    report: Any = None
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


def one(kind: str) -> Callable[[Recipe, RunOptions], tuple[str, ...]]:
    """`names` of a kind that runs as one step of its own name."""
    return lambda recipe, opts: (kind,)
