"""The report's step sections, in report order: build (every step needs it; not in the registry), then each
step kind's `Section` (report/<kind>.py), as the registry (patchkit.run.steps.STEPS) pairs it with the kind's
runner. The registry imports the report modules, so it is read when first asked, not when this is imported."""

from __future__ import annotations

from typing import Any

import patchkit.report.build as build
import patchkit.run.steps as registry
from patchkit.report.part import Section


def sections() -> dict[str, Section]:
    """Step kind -> its Section, in report order."""
    return {s.kind: s for s in (build.SECTION, *(k.report for k in registry.STEPS if k.report))}


def slots() -> list[tuple[str, str, bool]]:
    """The markdown parts the sections fill, in order: (slot, heading, shown when it has no blocks)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for s in sections().values():
        out.setdefault(s.slot, (s.slot, s.heading, s.shown_empty))
    return list(out.values())


def __getattr__(name: str) -> Any:
    if name == "SECTIONS":
        return sections()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
