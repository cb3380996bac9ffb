"""The one registry of steps: every step has one name used everywhere, a runner, and a report section."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import report
from patchkit.cli import make_parser
from patchkit.errors import OptionError
from patchkit.results import timeline
from patchkit.run import steps


def test_every_step_has_its_report_section_and_a_unique_name():
    names = [k.name for k in steps.STEPS]
    assert len(names) == len(set(names))
    for k in steps.STEPS:
        assert k.report_section in report.SECTIONS, k.name
        assert callable(k.run) and callable(k.inputs) and k.help
    # the report shows the steps in the registry's order (build first: every step needs it)
    order = [s for s in report.SECTIONS if s != "build"]
    assert order == [k.report_section for k in steps.STEPS]
    # the timeline (patchkit.results.timeline, read by the report) knows the kinds that time kernels
    assert set(timeline.timing_kinds()) == {k.name for k in steps.STEPS if k.timing}


def test_every_kind_owns_its_whole_report_part():
    """A kind's Section is its own (its name, its step), with evidence, a markdown section under a heading,
    and its "Not tested" lines; the template names no section: it lays out the registry's slots."""
    for k in steps.STEPS:
        s = k.report
        assert s is not None, f"{k.name}: no report section (report/<kind>.py SECTION)"
        assert s.kind == k.name and k.owns(s.step.rstrip(":") if s.step.endswith(":") else s.step), k.name
        assert callable(s.evidence) and callable(s.markdown) and callable(s.not_tested), k.name
        assert s.slot and s.heading, k.name
        assert s.slot not in ("summary", "hardware", "not_tested", "attribution", "sweep"), k.name
    template = (Path(report.__file__).parent / "templates" / "pr.md.j2").read_text()
    for s in report.SECTIONS.values():
        assert f"### {s.heading}" not in template and f"s.{s.slot}" not in template, s.kind
    # `patchkit bench WHAT` offers every bench:<what> kind of the registry, its `after` steps first
    bench = make_parser().parse_args(["bench", "kernel"]).command_object.WHAT
    assert {f"bench:{w}" for w in bench} == {k.name for k in steps.STEPS if k.name.startswith("bench:")}
    for w, names in bench.items():
        assert names == (*steps.BY_NAME[f"bench:{w}"].after, f"bench:{w}")


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


def test_a_step_the_recipe_does_not_ask_for_or_cannot_build_is_not_run():
    """Issue 28: no step runs on defaults, nor one whose program [build] targets do not build."""
    import re
    from pathlib import Path

    from patchkit.options import resolve_run
    from patchkit.recipe import parse_recipe

    root = Path(__file__).resolve().parents[2]
    full = (root / "recipes" / "default.toml").read_text()

    def unmet(text: str, cli: dict | None = None) -> dict[str, str]:
        r = parse_recipe(text, root / "recipes" / "x.toml")
        opts = resolve_run(r, cli or {}, steps=tuple(k.name for k in steps.STEPS), environ={})
        return {k.name: steps.unmet(k, r, opts) for k in steps.STEPS}

    assert set(unmet(full).values()) == {""}  # the default recipe asks for every step and builds every tool
    no_tables = re.sub(r"^\[(bench\.decode|model|numerics)\]\n(?:(?!\[).*\n)*", "", full, flags=re.M)
    got = unmet(no_tables)
    assert (
        got["bench:decode"] == "the recipe has no [bench.decode]" and got["numerics"] == "the recipe has no [numerics]"
    )
    assert got["test"] == got["bench:kernel"] == ""
    # no [bench.kernel]: no kernel timing of the default op (FLASH_ATTN_EXT), nor the steps on its cases
    no_kernel = re.sub(r"^\[bench\.kernel\]\n(?:(?!\[).*\n)*", "", full, flags=re.M)
    got = unmet(no_kernel)
    for name in ("bench:kernel", "bench:path", "bench:occupancy"):
        assert got[name] == "the recipe has no [bench.kernel]", (name, got[name])
    assert got["test"] == got["bench:decode"] == ""
    no_model = re.sub(r"^\[model\]\n(?:(?!\[).*\n)*", "", full, flags=re.M)
    assert unmet(no_model)["numerics"].startswith("no model: the recipe has no [model]")
    assert unmet(no_model, {"model": "/some/model.gguf"})["numerics"] == ""  # --model names one
    tbo = re.sub(r"^targets = .*$", 'targets = ["test-backend-ops"]', full, flags=re.M)
    got = unmet(tbo)
    assert got["bench:decode"] == "the recipe's [build] targets do not build llama-bench"
    assert got["numerics"] == "the recipe's [build] targets do not build llama-completion and llama-perplexity"
    assert got["test"] == got["bench:kernel"] == ""
