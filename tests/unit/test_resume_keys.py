"""Resume keyed by build keys (issue 29): a step finished in a run folder is skipped on `--run ID` only
while every variant's build key (patchkit.build.build_key: the variant's patches' sha256, the build
options, the toolchain) is the one the step measured; a patch edited since makes the step run again.
Real recipe and patch files (a copy of the project's), real run folder, real steps table."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from patchkit import series
from patchkit.errors import ResultsError
from patchkit.measure.tool import Built
from patchkit.options import Context, resolve_run
from patchkit.recipe import load_recipe
from patchkit.results import Bundle, Status
from patchkit.run import pipeline, steps
from patchkit.source import BaseInfo
from patchkit.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
BASE = BaseInfo(
    key="k",
    ref="refs/x",
    commit="0c1e57098bba43ac29e6e3b677cdceebdd22334f",
    route="sdist",
    upstream="u",
    upstream_verified=True,
)


def _project(tmp: Path) -> Path:
    shutil.copytree(ROOT / "recipes", tmp / "recipes")
    shutil.copytree(ROOT / "patches", tmp / "patches")
    return tmp


def _built(proj: Path, bundle: Bundle, ws: Workspace) -> Built:
    recipe = load_recipe(str(proj / "recipes" / "default.toml"))
    recipe = dataclasses.replace(recipe, sections=frozenset({"suites"}))  # no [numerics]: not run, at once
    states = tuple(
        series.VariantState(
            name=v.name, key=series.variant_key(recipe, BASE, v), base=BASE.commit, head="h", patches=[]
        )
        for v in series.plan_variants(recipe)
    )
    return Built(
        ctx=Context(recipe=recipe, ws=ws), base=BASE, bundle=bundle, states=states, variants=None, backend="cpu"
    )


@pytest.fixture
def setup(tmp_path):
    proj = _project(tmp_path / "proj")
    ws = Workspace.at(tmp_path / "work")
    bundle = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id="r1", meta={})
    recipe = load_recipe(str(proj / "recipes" / "default.toml"))
    opts = resolve_run(recipe, {"backend": "cpu"}, steps=tuple(k.name for k in steps.STEPS), environ={})
    return proj, ws, bundle, opts


def test_a_step_done_before_a_patch_was_edited_runs_again(setup, capsys):
    proj, ws, bundle, opts = setup
    kind = steps.kind_of("numerics")
    first = pipeline._one(_built(proj, bundle, ws), opts, kind, "numerics")
    assert [s.status for s in first] == [Status.NOT_RUN] and set(first[0].data["inputs"]["build_keys"]) == {
        "base",
        "+0001",
        "+0001+0002",
    }
    # the same code: skipped
    assert pipeline._one(_built(proj, bundle, ws), opts, kind, "numerics") == []
    assert "done earlier (not_run), skipped" in capsys.readouterr().out
    # patch 0002 edited: +0001+0002's build key changes (was: "done earlier, skipped" with the old code's result)
    p = proj / "patches" / "0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch"
    p.write_text(p.read_text() + "\n")
    again = pipeline._one(_built(proj, bundle, ws), opts, kind, "numerics")
    assert len(again) == 1
    out = capsys.readouterr().out
    assert "with other code (build key of +0001+0002 " in out and "run again" in out and "+0001 " not in out
    keys = again[0].data["inputs"]["build_keys"]
    assert keys["+0001+0002"] != first[0].data["inputs"]["build_keys"]["+0001+0002"]
    assert keys["base"] == first[0].data["inputs"]["build_keys"]["base"]
    assert pipeline._one(_built(proj, bundle, ws), opts, kind, "numerics") == []


def test_a_step_recorded_without_build_keys_runs_again_and_other_options_are_still_refused(setup, capsys):
    proj, ws, bundle, opts = setup
    kind = steps.kind_of("numerics")
    built = _built(proj, bundle, ws)
    step = pipeline._one(built, opts, kind, "numerics")[0]
    # a step of an older run: inputs without build keys
    del step.data["inputs"]["build_keys"]
    bundle.record(step)
    assert len(pipeline._one(built, opts, kind, "numerics")) == 1
    assert "its build keys were not recorded" in capsys.readouterr().out
    other = dataclasses.replace(
        opts, numerics=dataclasses.replace(opts.numerics, n_predict=opts.numerics.n_predict + 1)
    )
    with pytest.raises(ResultsError, match=r"step numerics was done with n_predict=") as e:
        pipeline._one(built, other, kind, "numerics")
    assert "build_keys" not in str(e.value)
