"""The report's step sections, in report order: build (every step needs it), then each step kind's
`Section` (the SECTION of report/<kind>.py) in the registry's order (patchkit.registry.KINDS names the
modules; patchkit.run.steps pairs each with its runner). The report does not import the run stage."""

from __future__ import annotations

import importlib

import patchkit.report.build as build
from patchkit import registry
from patchkit.report.part import Section


def _sections(names: tuple[str, ...]) -> dict[str, Section]:
    """step kind -> its Section, in report order: build, then each registered kind's report module."""
    mods = [build, *(importlib.import_module(f"patchkit.report.{n}") for n in names)]
    return {m.SECTION.kind: m.SECTION for m in mods}


SECTIONS: dict[str, Section] = _sections(registry.KINDS)


def sections() -> dict[str, Section]:
    """Step kind -> its Section, in report order."""
    return SECTIONS


def slots() -> list[tuple[str, str, bool]]:
    """The markdown parts the sections fill, in order: (slot, heading, shown when it has no blocks)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for s in SECTIONS.values():
        out.setdefault(s.slot, (s.slot, s.heading, s.shown_empty))
    return list(out.values())
