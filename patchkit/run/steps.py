"""The steps the pipeline runs, in pipeline order: the registry's kinds (patchkit.registry.KINDS, one name
per kind), each the `STEP` of its runner module (patchkit/measure/<kind>.py: name, resource, the step names it
expands to, runner, inputs, reparse, what `patchkit import` can feed it, its data class) paired here with the
`SECTION` of its report module (patchkit/report/<kind>.py: evidence, markdown section, "Not tested" lines).
Adding a step = those two modules and one name in the registry; the report's sections, its "Not tested"
list, `patchkit bench`'s choices, `--skip`, `reparse --step`, `import --tool`, the results schema and the
timeline's timing kinds follow from it.

Fetch, apply and build come before every step (patchkit.run.pipeline); `build:<config>` is recorded
like a step but is not in this table because every step needs it.
"""

from __future__ import annotations

import dataclasses

from patchkit import registry
from patchkit.errors import OptionError
from patchkit.measure.kind import ImportSpec, Resource, StepKind
from patchkit.options import RunOptions
from patchkit.recipe import Recipe, _hint
from patchkit.report.sections import sections

__all__ = ["STEPS", "ImportSpec", "Resource", "StepKind"]


def _paired() -> tuple[StepKind, ...]:
    """Each registered kind's runner declaration with its report section (the report's own table of them,
    patchkit.report.sections, made from the same registry: a kind whose report module has no SECTION of its
    name fails here)."""
    return tuple(dataclasses.replace(step, report=sections()[step.name]) for step in registry.runners())


STEPS: tuple[StepKind, ...] = _paired()
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
