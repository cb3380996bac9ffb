"""The one registry of steps: every step has one name used everywhere, a runner, and a report section."""

from __future__ import annotations

import pytest

from patchkit import report, steps
from patchkit.cli import make_parser
from patchkit.errors import OptionError


def test_every_step_has_its_report_section_and_a_unique_name():
    names = [k.name for k in steps.STEPS]
    assert len(names) == len(set(names))
    for k in steps.STEPS:
        assert k.report_section in report.SECTIONS, k.name
        assert callable(k.run) and callable(k.inputs) and k.help
    # the report shows the steps in the registry's order (build first: every step needs it)
    order = [s for s in report.SECTIONS if s != "build"]
    assert order == [k.report_section for k in steps.STEPS]


def test_step_names_are_one_set_everywhere():
    """--skip, --step (reparse) and import accept the registry's names and nothing else."""
    assert steps.kind_of("test:flash_attn").name == "test"
    assert steps.kind_of("bench:path").name == "bench:path"
    with pytest.raises(OptionError, match=r"no step 'kernel-path'"):
        steps.kind_of("kernel-path")
    with pytest.raises(OptionError, match=r"--skip bench-kernel: no such step \(steps: check, test, bench:kernel"):
        steps.check_names(("bench-kernel",), "--skip")
    p = make_parser()
    imp = p.parse_args(["import", "--tool", "perf-sql", "--log", "base=x"])
    assert steps.IMPORT_TOOLS[imp.tool].name == "bench:kernel"
    bench = p.parse_args(["bench", "path"])
    assert bench.command_object.WHAT[bench.what][-1] == "bench:path"


def test_every_option_has_help():
    p = make_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, sp in sub.choices.items()
        for a in sp._actions
        if a.help is None and a.dest != "help"
    ]
    assert missing == []
