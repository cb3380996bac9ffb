"""Steps a recipe does not ask for, or whose program it does not build, are "not run: why" (issue 28).

Real CPU builds of the default recipe's base and series: the first test builds only test-backend-ops
(its own build folder, about 3 minutes on 2 cores, once); the second reuses the default recipe's CPU
build (tests/integration/conftest.py's cpu_build).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.integration.test_cli_cpu import SMALL_PERF, SMALL_TESTS

ROOT = Path(__file__).resolve().parents[2]


def _project(tmp: Path, name: str, edit) -> Path:
    """A copy of the default recipe (and its patches) named `name`, its text changed by `edit`."""
    shutil.copytree(ROOT / "patches", tmp / "patches")
    (tmp / "recipes").mkdir()
    text = (ROOT / "recipes" / "default.toml").read_text()
    text = edit(text.replace('name = "seed-fattn"', f'name = "{name}"'))
    path = tmp / "recipes" / f"{name}.toml"
    path.write_text(text)
    return path


def _drop(text: str, table: str) -> str:
    """The recipe text without one [table] (up to the next table)."""
    out = re.sub(r"^\[" + re.escape(table) + r"\]\n(?:(?!\[).*\n)*", "", text, flags=re.M)
    assert out != text, table
    return out


def _not_tested(md: str, step: str, why: str) -> bool:
    """Whether the report's list says `step` was not run on the CPU run, and why."""
    return re.search(f"`{re.escape(step)}` on CPU[^:]*: not run: {re.escape(why)}", md) is not None


def _run(cli, work, recipe: Path, label: str, *extra: str):
    for old in work.runs(recipe.stem).glob(f"*-{label}"):
        shutil.rmtree(old)
    r = cli("run", "-r", str(recipe), "--backend", "cpu", "--work", str(work.root), "--label", label, *extra)
    [run] = list(work.runs(recipe.stem).glob(f"*-{label}"))
    return r, run, json.loads((run / "results.json").read_text())["steps"]


NO_J = ROOT / "tests" / "fixtures" / "patches" / "test-backend-ops-without-j.patch"


def _tbo_only(tmp: Path) -> Path:
    """The default recipe building only test-backend-ops, with a local patch that takes test-backend-ops'
    -j away (as at upstream bases from before it had one): one build folder for the tests below."""

    def edit(text: str) -> str:
        text = re.sub(r"^targets = .*$", 'targets = ["test-backend-ops"]', text, flags=re.M)
        return text + '\n[[series]]\nfile = "patches/local/9001-no-j.patch"\nid = "no-j"\nlocal = true\n'

    recipe = _project(tmp, "seed-fattn-tbo", edit)
    shutil.copy2(NO_J, tmp / "patches" / "local" / "9001-no-j.patch")
    return recipe


@pytest.mark.slow
def test_a_recipe_that_builds_no_llama_bench_exits_0_with_decode_and_numerics_not_run(work, cli, tmp_path):
    recipe = _tbo_only(tmp_path)
    small = ["--filter", SMALL_TESTS, "--params", SMALL_PERF, "--rounds", "1", "--kernel-max-rounds", "1"]
    r, run, steps = _run(cli, work, recipe, "ci-notools", "-j", "2", "--measure-same-code", *small)
    assert r.returncode == 0, r.stdout[-3000:]
    assert steps["test:flash_attn"]["status"] == "ok"  # what it builds runs
    assert steps["bench:kernel"]["status"] == "ok"
    for name, tool in (("bench:decode", "llama-bench"), ("numerics", "llama-completion")):
        s = steps[name]
        assert s["status"] == "not_run" and f"[build] targets do not build {tool}" in s["reason"], s
        assert not s["logs"], s  # nothing was started
    assert not (run / "numerics").exists()
    md = (run / "report.md").read_text()
    nt = md.split("Not tested", 1)[1]
    assert re.search(
        r"`bench:decode` on CPU[^:]*: not run: the recipe's \[build\] targets do not build llama-bench", nt
    )
    assert re.search(
        r"`numerics` on CPU[^:]*: not run: the recipe's \[build\] targets do not build llama-completion", nt
    )
    assert "not ok:" not in r.stdout


@pytest.mark.slow
def test_the_readme_flags_on_a_base_without_j_drop_it_with_one_note(work, cli, tmp_path):
    """`patchkit run --backend cpu --test-jobs 2` (the README's first command) where test-backend-ops has
    no -j (as at the bases of llama-cpp-python 0.3.16 and 0.3.17): -j is left out, said once before the
    builds (from the variants' tests/test-backend-ops.cpp), and the suite runs: exit 0 (issue 34)."""
    recipe = _tbo_only(tmp_path)
    r, run, steps = _run(
        cli, work, recipe, "ci-no-j", "--test-jobs", "2", "-j", "2", "--filter", SMALL_TESTS, "--skip", "bench:kernel"
    )
    assert r.returncode == 0, r.stdout[-3000:]
    note = (
        "test: test-backend-ops of base, +0001, +0001+0002 has no option -j (tests/test-backend-ops.cpp parses "
        "none): --test-jobs 2 is left out (it runs on its own threads)"
    )
    assert r.stdout.count("has no option -j") == 1 and note in r.stdout, r.stdout[-3000:]
    builds = [i for i in (r.stdout.find("built in"), r.stdout.find("build up to date")) if i >= 0]
    assert builds and r.stdout.index(note) < min(builds)  # said before the builds (made here or reused)
    s = steps["test:flash_attn"]
    assert s["status"] == "ok" and s["logs"], s
    for log in s["logs"]:  # the tool ran without -j (a raw log's first line is its command line)
        assert " -j " not in (run / log).read_text().splitlines()[0] + " ", log
    assert "not ok:" not in r.stdout


def test_steps_the_recipe_does_not_ask_for_do_not_run_on_defaults(cpu_build, work, cli, tmp_path):
    """Without [bench.decode], [model] and [numerics] (the default recipe's build reused: the same name,
    series and build options), decode and numerics are not run, and no synthetic model is written."""

    def edit(text: str) -> str:
        return _drop(_drop(_drop(text, "bench.decode"), "model"), "numerics")

    recipe = _project(tmp_path, "seed-fattn", edit)
    models = set((work.cache / "models").glob("*")) if (work.cache / "models").is_dir() else set()
    r, run, steps = _run(cli, work, recipe, "ci-notables", "--filter", SMALL_TESTS, "--skip", "bench:kernel")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "build up to date" in r.stdout  # the default recipe's build, nothing compiled
    assert steps["bench:decode"]["status"] == "not_run"
    assert steps["bench:decode"]["reason"] == "the recipe has no [bench.decode]"
    assert steps["numerics"]["status"] == "not_run" and steps["numerics"]["reason"] == "the recipe has no [numerics]"
    assert not (run / "numerics").exists()
    assert (set((work.cache / "models").glob("*")) if (work.cache / "models").is_dir() else set()) == models
    assert re.search(
        r"`numerics` on CPU[^:]*: not run: the recipe has no \[numerics\]", (run / "report.md").read_text()
    )
    assert "[bench:decode] other GPU steps held while it timed" not in r.stdout  # it did not run: it timed nothing
    assert "[bench:decode] CPU lane held while it timed" not in r.stdout
    # the test step tested base only (its variants compile to base's code) and says so, not "2 variants"
    # (base and the series' end are the default tested variants)
    assert re.search(r"\[test:flash_attn\] \d+ cases a variant: up to 2 variants", r.stderr), r.stderr[-2000:]
    assert re.search(r"\[test:flash_attn\] \d+ cases run: 1 variant\(s\) \(base\)", r.stderr), r.stderr[-2000:]
