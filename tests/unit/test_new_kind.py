"""A new step kind is two modules and one registry line (docs/layout.md, "Adding a step"): a toy timing kind,
`bench:toy`, written here as its runner module (patchkit/measure/toy.py) and its report module
(patchkit/report/toy.py), and added as one name to patchkit.registry.KINDS, is in the registry's STEPS, the
report's sections (and its "Not tested" list on a committed run), the results schema's KINDS and the doc
generated from it, the timeline's timing kinds, `patchkit bench toy` and `--skip`, with no other edit.

It runs in a fresh interpreter: every derived table is made once, when its module is imported, and the
toy's modules are found by name (a finder for the two files) as the registry finds every kind's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchkit.errors import OptionError

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "h200-recheck"  # a committed run folder: it has no bench:toy step

MEASURE = '''
"""bench:toy: times `true`, a toy kind (tests/unit/test_new_kind.py)."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.measure.kind import Resource, StepKind, one
from patchkit.results import Status, Step
from patchkit.results.data.base import ABSENT, StepData


@dataclass(kw_only=True)
class ToyData(StepData):
    """bench:toy. A step that did not run holds only `inputs`."""

    KIND = "bench:toy"
    seconds: float = ABSENT  # how long `true` took (absent: not timed)


def step(built, opts, name: str) -> Step:
    return Step(name=name, status=Status.OK, data=ToyData(seconds=0.0).to_dict())


def inputs(built, opts, name: str) -> dict:
    return {}


STEP = StepKind(
    name="bench:toy",
    help="times true",
    resource=Resource.GPU,
    names=one("bench:toy"),
    timing=True,
    run=step,
    inputs=inputs,
    data=ToyData,
)
'''

REPORT = '''
"""bench:toy's part of the report (tests/unit/test_new_kind.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.measure.toy import ToyData
from patchkit.report.evidence import StepRun
from patchkit.report.fmt import text
from patchkit.report.part import Section, not_run_lines


@dataclass(kw_only=True)
class ToyRun(StepRun):
    seconds: float | None = None


@dataclass(kw_only=True)
class Toy:
    runs: list[ToyRun] = field(default_factory=list)


def evidence(runs, order):
    out = []
    for r in runs:
        s = r.step("bench:toy")
        e = ToyRun.of(r, "bench:toy", s)
        if s is not None and s.status == "ok":
            e.seconds = ToyData.from_step(s).seconds
        out.append(e)
    return Toy(runs=out)


def markdown(ev, multi):
    return [text(f"{e.gpu}: {e.seconds} s") for e in ev.toy.runs if e.seconds is not None]


def not_tested(runs, ev):
    return not_run_lines("steps", "bench:toy", ev.toy.runs, nothing_measured=False)  # ev.<slot>: its evidence


SECTION = Section(
    kind="bench:toy",
    step="bench:toy",
    slot="toy",
    heading="Toy timing",
    evidence=evidence,
    markdown=markdown,
    not_tested=not_tested,
    shown_empty=False,
)
'''

# the child: the toy's two files found by name, one name added to the registry, then every derived table read
CHILD = """
import importlib.abc, importlib.util, json, sys
from pathlib import Path

TMP = Path(sys.argv[1])
FILES = {"patchkit.measure.toy": TMP / "measure_toy.py", "patchkit.report.toy": TMP / "report_toy.py"}


class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_file_location(name, FILES[name]) if name in FILES else None


sys.meta_path.insert(0, Finder())
import patchkit.registry as registry

registry.KINDS = (*registry.KINDS, "toy")  # the one registry line

from patchkit.cli import make_parser
from patchkit.errors import OptionError
from patchkit.report import render
from patchkit.report.sections import sections
from patchkit.results import Bundle, timeline
from patchkit.results.data import schema
from patchkit.run import steps

try:
    steps.check_names(("bench:toy",), "--skip")
    skip = "ok"
except OptionError as e:
    skip = str(e)
bench = make_parser().parse_args(["bench", "kernel"]).command_object.WHAT
md = render([Bundle.open(Path(sys.argv[2]))], "md")
print(json.dumps({
    "steps": [k.name for k in steps.STEPS],
    "paired": [[k.name, k.report_section, k.data.__name__] for k in steps.STEPS],
    "sections": list(sections()),
    "slots": [s[0] for s in __import__("patchkit.report.sections", fromlist=["slots"]).slots()],
    "schema": [k.KIND for k in schema.KINDS],
    "schema_doc": schema.markdown(),
    "timing": list(timeline.timing_kinds()),
    "skip": skip,
    "bench": {w: list(v) for w, v in bench.items()},
    "not_tested": [line for line in md.splitlines() if "bench:toy" in line],
}))
"""


def test_a_new_kind_is_two_modules_and_one_registry_line(tmp_path):
    from patchkit.report.sections import sections, slots
    from patchkit.results import timeline
    from patchkit.results.data import schema
    from patchkit.run import steps

    (tmp_path / "measure_toy.py").write_text(textwrap.dedent(MEASURE))
    (tmp_path / "report_toy.py").write_text(textwrap.dedent(REPORT))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", CHILD, str(tmp_path), str(RUN)]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    # this interpreter's tables (no toy) are the same with the toy last: the registry's order
    assert got["steps"] == [*(k.name for k in steps.STEPS), "bench:toy"]
    assert got["paired"][-1] == ["bench:toy", "bench:toy", "ToyData"]
    assert got["sections"] == [*sections(), "bench:toy"]
    assert got["slots"] == [*(s[0] for s in slots()), "toy"]
    assert got["schema"] == [*(k.KIND for k in schema.KINDS), "bench:toy"]
    assert "### `bench:toy` (patchkit.measure.toy)" in got["schema_doc"]
    assert "| `seconds` | number | may be | how long `true` took (absent: not timed) |" in got["schema_doc"]
    assert got["timing"] == [*timeline.timing_kinds(), "bench:toy"]
    assert got["skip"] == "ok"
    assert got["bench"]["toy"] == ["bench:toy"]
    # the report asks every kind for its "Not tested" lines: a run without the step says so
    assert got["not_tested"] == ["- `bench:toy` on NVIDIA H200: not run: no `bench:toy` step in this run"], got[
        "not_tested"
    ]
    # and without the registry line the two modules are not a kind
    with pytest.raises(OptionError, match="bench:toy: no such step"):
        steps.check_names(("bench:toy",), "--skip")
