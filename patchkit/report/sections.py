"""The report's step sections, in report order: build (every step needs it), then each step kind's
`Section` (report/<kind>.py) in the registry's order (patchkit.run.steps.STEPS pairs each with its runner;
tests/unit/test_steps.py fails when the two orders differ). The report does not import the run stage."""

from __future__ import annotations

import patchkit.report.build as build
import patchkit.report.check as check
import patchkit.report.decode as decode
import patchkit.report.kernel as kernel
import patchkit.report.numerics as numerics
import patchkit.report.occupancy as occupancy
import patchkit.report.path as path
import patchkit.report.test as test
from patchkit.report.part import Section

# step kind -> its Section, in report order
SECTIONS: dict[str, Section] = {
    s.kind: s for s in (m.SECTION for m in (build, check, test, kernel, path, occupancy, decode, numerics))
}


def sections() -> dict[str, Section]:
    """Step kind -> its Section, in report order."""
    return SECTIONS


def slots() -> list[tuple[str, str, bool]]:
    """The markdown parts the sections fill, in order: (slot, heading, shown when it has no blocks)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for s in SECTIONS.values():
        out.setdefault(s.slot, (s.slot, s.heading, s.shown_empty))
    return list(out.values())
