"""The one registry of step kinds, in pipeline order: one name per kind (nox's literal task tuple is the model).

A kind NAME is two modules: patchkit/measure/NAME.py, its runner, which ends with `STEP` (a
patchkit.measure.kind.StepKind: the kind's name, resource, runner, inputs, reparse, import, data class, ...),
and patchkit/report/NAME.py, its part of the report, which holds `SECTION` (patchkit.report.part.Section).
Everything else is derived from this tuple, each stage reading its own modules by name:
patchkit.run.steps.STEPS (each STEP paired with its SECTION), the report's sections in this order
(patchkit.report.sections), the data classes docs/results-schema.md is generated from
(patchkit.results.data.schema) and the kinds the timeline's critical path waits on (patchkit.results.timeline).
tests/unit/test_imports.py counts the imports by name made from this tuple like any other import.

Fetch, apply and build come before every step (patchkit.run.pipeline); `build:<config>` is recorded like a
step but is not a kind here because every step needs it.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the registry imports no kind by its code: the modules are found by name
    from patchkit.measure.kind import StepKind

KINDS: tuple[str, ...] = (
    "check",
    "test",
    "kernel",
    "path",
    "occupancy",
    "decode",
    "numerics",
)


@functools.cache
def _runners(names: tuple[str, ...]) -> tuple[StepKind, ...]:
    return tuple(importlib.import_module(f"patchkit.measure.{n}").STEP for n in names)


def runners() -> tuple[StepKind, ...]:
    """Each kind's `STEP` (its runner module's declaration), in registry order; without its report section
    (patchkit.run.steps pairs the two)."""
    return _runners(KINDS)
