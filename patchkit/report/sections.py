"""The report's step sections, one per step kind, in report order (see patchkit.report's docstring)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import patchkit.report.build as build
import patchkit.report.check as check
import patchkit.report.decode as decode
import patchkit.report.kernel as kernel
import patchkit.report.numerics as numerics
import patchkit.report.occupancy as occupancy
import patchkit.report.path as path
import patchkit.report.test as test
from patchkit.report.evidence import Evidence
from patchkit.report.fmt import Block
from patchkit.report.runview import RunView


@dataclass(frozen=True)
class Section:
    """The report's part of one step kind.

    kind:     the step kind ("build", "check", "test", "bench:kernel", "bench:path", "bench:decode", "numerics")
    step:     the step name it reads, or the prefix of its names ("build:", "test:")
    slot:     the Evidence field its evidence goes into, and the template's block list its markdown is added to
              (build and check share "builds": one entry per run holding both)
    evidence: (runs, variant order) -> the section's evidence, runs in report order
    markdown: (evidence, several runs merged) -> the section's blocks
    """

    kind: str
    step: str
    slot: str
    evidence: Callable[[list[RunView], list[str]], Any]
    markdown: Callable[[Evidence, bool], list[Block]]


SECTIONS: dict[str, Section] = {
    s.kind: s
    for s in (
        Section("build", build.STEP, "builds", build.evidence, build.markdown),
        Section("check", check.STEP, "builds", check.evidence, check.markdown),
        Section("test", test.STEP, "tests", test.evidence, test.markdown),
        Section("bench:kernel", kernel.STEP, "kernel", kernel.evidence, kernel.markdown),
        Section("bench:path", path.STEP, "kernel_path", path.evidence, path.markdown),
        Section("bench:occupancy", occupancy.STEP, "occupancy", occupancy.evidence, occupancy.markdown),
        Section("bench:decode", decode.STEP, "decode", decode.evidence, decode.markdown),
        Section("numerics", numerics.STEP, "numerics", numerics.evidence, numerics.markdown),
    )
}
