"""The run folder of a target whose node was lost (patchkit.executor.gather.not_run), on a committed real CPU run.

Defect (seen on 2026-12-05 in tests/integration/test_ray.py's node-lost test): the lost node's worker made b's run
folder (results.json) and died before it wrote env.json; the retried node resumed that folder, so env.json was never
written; gather kept the folder as it was, and the merged report was refused: "build options other than the CUDA
arch differ (a: ... cmake flag -DGGML_CUDA=OFF ...; b: not run: nothing else; ...)", exit 2 instead of 1.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from patchkit.executor import gather
from patchkit.executor.jobs import Job, Target
from patchkit.options import Context, resolve_run
from patchkit.recipe import load_recipe
from patchkit.report.merge import merge_problems
from patchkit.report.runview import open_runs
from patchkit.results import Bundle, Status
from patchkit.workspace import Workspace, read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cpu-series-real" / "run"


def _setup(tmp_path: Path) -> tuple[Context, Job, Path]:
    recipe = load_recipe(str(ROOT / "recipes" / "cpu-fattn-v-f16-real.toml"))
    ctx = Context(recipe=recipe, ws=Workspace.at(tmp_path / "work"))
    runs = ctx.ws.runs(recipe.name)
    a = shutil.copytree(EXAMPLE, runs / "R-a")  # target a's finished run
    opts = replace(resolve_run(recipe, {"backend": "cpu"}, steps=("test",), environ={}), run="R-b")
    job = Job(target=Target(name="b", resource="node_b"), opts=opts, label="R", not_run_ok=True)
    return ctx, job, a


def test_a_lost_targets_folder_without_env_json_still_merges_with_the_finished_one(tmp_path):
    ctx, job, a = _setup(tmp_path)
    data = read_json(a / "results.json")
    made = {k: data[k] for k in ("base", "variants", "recipe_info", "backend", "archs")}  # what a node writes first
    Bundle.create(ctx.ws.runs(ctx.recipe.name), recipe=ctx.recipe.name, run_id="R-b", meta=made).close()
    b = gather.not_run(ctx, job, "node lost (NodeDiedError on node 1234: dead)", like=a)
    env = read_json(b / "env.json")
    assert env == {k: read_json(a / "env.json")[k] for k in gather.COMPARED_ENV}
    assert env["cmake_flags"] and env["base"] and env["patches"]
    bundles = [Bundle.open(a), Bundle.open(b)]
    assert merge_problems(open_runs(bundles)) == []
    lost = bundles[1].step("test:flash_attn")
    assert lost is not None and lost.status == Status.NOT_RUN and lost.reason.startswith("node lost (")


def test_a_lost_targets_env_json_is_kept_where_its_node_wrote_one(tmp_path):
    ctx, job, a = _setup(tmp_path)
    b = Bundle.create(ctx.ws.runs(ctx.recipe.name), recipe=ctx.recipe.name, run_id="R-b", meta={})
    (b.path / "env.json").write_text('{"host": "node-b", "cmake_flags": ["-DGGML_CUDA=OFF"]}\n')
    b.close()
    gather.not_run(ctx, job, "node lost (NodeDiedError on node 1234: dead)", like=a)
    assert read_json(b.path / "env.json") == {"host": "node-b", "cmake_flags": ["-DGGML_CUDA=OFF"]}
