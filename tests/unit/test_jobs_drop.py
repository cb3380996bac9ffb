"""A speed option the base's test-backend-ops lacks (-j, added upstream after the bases of llama-cpp-python
0.3.16 and 0.3.17) is dropped with one printed note, never a failure (issue 34): before the builds from the
variants' tests/test-backend-ops.cpp, read here from each vendored base's own source in the cache repo of
$PATCHKIT_TEST_WORK (skipped where `patchkit fetch` has not put it there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchkit import vcs, vendored
from patchkit.cli import make_parser
from patchkit.measure import test as test_step
from patchkit.options import Machine, resolve_run
from patchkit.recipe import load_recipe
from patchkit.run import steps
from patchkit.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
HAS_J = {"0.3.16": False, "0.3.17": False, "0.3.34": True, "0.3.35": True, "0.3.36": True}


def _source(version: str) -> str:
    repo = Workspace.at(Path(os.environ.get("PATCHKIT_TEST_WORK", Path.home() / ".cache" / "patchkit-test"))).repo
    commit = vendored.by_version(version).commit
    text = vcs.show(repo, commit, test_step.TBO_SOURCE, git_dir=repo) if (repo / "HEAD").is_file() else None
    if text is None:
        pytest.skip(f"{version}'s llama.cpp ({commit[:9]}) is not in {repo} (patchkit fetch puts it there)")
    return text


def _opts(argv: list[str]):
    recipe = load_recipe(str(ROOT / "recipes" / "default.toml"))
    args = make_parser().parse_args(["run", "--backend", "cpu", *argv])
    kinds = tuple(k.name for k in steps.STEPS)
    return resolve_run(recipe, vars(args), steps=kinds, environ={}, machine=Machine(cores=2, gpus=0))


def test_every_vendored_base_is_listed():
    assert set(HAS_J) == {v.version for v in vendored.SDISTS}


@pytest.mark.parametrize("version", list(HAS_J))
def test_the_readme_flags_on_each_base(version, capsys):
    """`--test-jobs 2` (the README's first command): kept where the base parses -j, else dropped, said once."""
    opts = _opts(["--test-jobs", "2"])
    assert opts.test.jobs == 2 and not opts.test.jobs_default
    got = test_step.without_jobs_the_tool_lacks(opts, {"base": _source(version), "+0001": _source(version)})
    out = capsys.readouterr().out
    if HAS_J[version]:
        assert got is opts and out == ""
    else:
        assert got.test.jobs == 0 and got.build == opts.build and got.test.suites == opts.test.suites
        assert out == (
            "test: test-backend-ops of base, +0001 has no option -j (tests/test-backend-ops.cpp parses none): "
            "--test-jobs 2 is left out (it runs on its own threads)\n"
        )


def test_nothing_to_drop_without_test_jobs_or_without_a_source(capsys):
    old = _source("0.3.16")
    plain = _opts([])
    assert plain.test.jobs == 0
    assert test_step.without_jobs_the_tool_lacks(plain, {"base": old}) is plain
    asked = _opts(["--test-jobs", "2"])
    assert test_step.without_jobs_the_tool_lacks(asked, {"base": None}) is asked  # unknown: the usage text decides
    assert capsys.readouterr().out == ""
