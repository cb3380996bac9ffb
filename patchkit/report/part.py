"""What a step kind gives the report: its `Section` (declared in its report module, report/<kind>.py, and
paired with its runner by the registry, patchkit.run.steps), and the lines it adds to "Not tested".

    evidence:   (runs in report order, variant order) -> its typed evidence, stored as Evidence.<slot>
    markdown:   (evidence, several runs merged) -> its blocks, shown under `heading`
    not_tested: (runs, evidence) -> its "Not tested" lines, each in a group of NOT_TESTED_GROUPS

The report renders the sections in registry order (build first: it is not a step of the registry, every
step needs it). Sections sharing a slot (build and check: "builds") are one part of the markdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The groups of the "Not tested" list, in the order it shows them. Within a group the lines come in registry
# order; in a PER_RUN group they come run by run first (each run's lines of every kind, then the next run's).
NOT_TESTED_GROUPS = ("gpus", "archs", "platforms", "variants", "backends", "steps", "coverage", "results", "series")
PER_RUN = ("coverage",)


@dataclass(frozen=True)
class Missing:
    """One "Not tested" line: its group (NOT_TESTED_GROUPS), the index of the run it is about, its text."""

    group: str
    run: int
    text: str


@dataclass(frozen=True)
class Section:
    """The report's part of one step kind (see the module docstring).

    kind:    the step kind ("build", "check", "test", "bench:kernel", ...)
    step:    the step name it reads, or the prefix of its names ("build:", "test:")
    slot:    the Evidence field its evidence goes into, and the markdown part its blocks are added to
    heading: the markdown part's heading
    shown_empty: whether the heading is shown when the part has no blocks (a step added later: not shown
             for runs made before it existed)
    """

    kind: str
    step: str
    slot: str
    heading: str
    evidence: Callable[[list[Any], list[str]], Any]
    markdown: Callable[[Any, bool], list[Any]]
    not_tested: Callable[[list[Any], Any], list[Missing]]
    shown_empty: bool = True


def not_run_lines(group: str, name: str, runs: list[Any], *, nothing_measured: bool = True) -> list[Missing]:
    """`name` on a GPU: not run (status absent or not_run), or nothing measured (an error without data),
    for a kind whose evidence entries (StepRun) hold `measured`."""
    out = []
    for i, e in enumerate(runs):
        if e.status in ("absent", "not_run"):
            out.append(Missing(group, i, f"`{name}` on {e.gpu}: not run: {e.reason}"))
        elif nothing_measured and e.status == "error" and e.measured is None:
            out.append(Missing(group, i, f"`{name}` on {e.gpu}: nothing measured (error: {e.reason})"))
    return out


def variants_lacking(name: str, i: int, run: Any, order: list[str], got: set[str]) -> list[Missing]:
    """`name` on a GPU: the variants of the run (not compiled to base's code) it has no result of."""
    known = [v for v in order if v in run.variant_names and v not in run.same_code]
    lack = [v for v in known if v not in got]
    return (
        [Missing("coverage", i, f"`{name}` on {run.gpu}: variants not measured: {', '.join(lack)}.")]
        if got and lack
        else []
    )


def case_lines(name: str, runs: list[Any], step_runs: list[Any], order: list[str]) -> list[Missing]:
    """The "not tested" lines of a kind whose measured evidence holds cases keyed by variant (kernel timing,
    kernel path): each GPU's not-run line, then the variants it has no case of."""
    out = not_run_lines("steps", name, step_runs)
    for i, (r, e) in enumerate(zip(runs, step_runs)):
        got = {v for c in (e.measured.cases if e.measured else []) for v in c.variants}
        out += variants_lacking(name, i, r, order, got)
    return out


def ordered_lines(general: list[Missing], per_kind: list[list[Missing]]) -> list[str]:
    """The "Not tested" list: every line by group (NOT_TESTED_GROUPS); in a group the general lines first,
    then each kind's in registry order; a PER_RUN group run by run."""
    out: list[str] = []
    for g in NOT_TESTED_GROUPS:
        lines = [m for m in general if m.group == g] + [m for ms in per_kind for m in ms if m.group == g]
        if g in PER_RUN:
            lines = sorted(lines, key=lambda m: m.run)  # stable: kinds keep their order within a run
        out += [m.text for m in lines]
    return out
