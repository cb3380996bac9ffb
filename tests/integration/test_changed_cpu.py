"""`patchkit run --changed` end to end on the real CPU backend: the default recipe built, then patch
0002's FA MMA row edited (nstages 2 -> 1, the seed author's "tried and dropped" point) in a copy of the
project, and the recipe run again with --changed. The CUDA patches compile to base's code on the CPU,
so `--measure-same-code` makes the changed variant measured anyway."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATCH = "patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch"
OLD = "+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);"
NEW = OLD.replace("128, 2, true", "128, 1, true")
TESTS = r"hsk=256,hsv=256,nh=4,nr23=\[1,1\],kv=113,nb=1,"
PERF = r"kv=4096,nb=1,.*type_K=q4_0"


def _edited_project(tmp: Path) -> Path:
    proj = tmp / "proj"
    shutil.copytree(ROOT / "recipes", proj / "recipes")
    shutil.copytree(ROOT / "patches", proj / "patches")
    text = (proj / PATCH).read_text()
    assert text.count(OLD) == 1
    (proj / PATCH).write_text(text.replace(OLD, NEW))
    return proj


def test_changed_measures_only_the_edited_variant_on_the_cases_its_row_affects(cpu_build, work, cli, tmp_path):
    proj = _edited_project(tmp_path)
    run = work.runs("seed-fattn") / "ci-changed"
    shutil.rmtree(run, ignore_errors=True)
    args = ["--backend", "cpu", "--work", str(work.root), "-j", "2"]
    try:
        r = cli(
            "run",
            "--recipe",
            str(proj / "recipes" / "default.toml"),
            *args,
            "--run",
            "ci-changed",
            "--changed",
            "--measure-same-code",
            "--filter",
            TESTS,
            "--test-jobs",
            "2",
            "--params",
            PERF,
            "--rounds",
            "2",
            "--kernel-max-rounds",
            "2",
            "--skip",
            "bench:decode",
            "--skip",
            "numerics",
        )
        # resuming the run keeps its scope (its builds are the last ones now); without --changed: refused first
        recipe = str(proj / "recipes" / "default.toml")
        again = cli("run", "--recipe", recipe, *args, "--run", "ci-changed", check=False)
    finally:  # the shared CPU build folder back to the recipe as committed
        cli("build", *args)
    assert "--changed: base: unchanged since its last build" in r.stdout
    res = json.loads((run / "results.json").read_text())
    sc = res["scope"]
    assert set(sc["unchanged"]) == {"base", "+0001"} and set(sc["changed"]) == {"+0001+0002"}
    rows = sc["changed"]["+0001+0002"]["rows"]
    assert sorted(r["nstages_target"] for r in rows) == [1, 2] and all(r["DKQ"] == r["DV"] == 256 for r in rows)
    assert sc["params"] == "(?:hsk=256,hsv=256,)"
    steps = res["steps"]
    t = steps["test:flash_attn"]
    assert t["status"] == "ok" and list(t["data"]["variants"]) == ["+0001+0002"]  # base unchanged: not tested
    where = t["data"]["args"][t["data"]["args"].index("-p") + 1]
    assert re.search(where, "hsk=256,hsv=256,nh=4,nr23=[1,1],kv=113,nb=1,mask=1")
    assert not re.search(where, "hsk=128,hsv=128,nh=4,nr23=[1,1],kv=113,nb=1,mask=1")
    k = steps["bench:kernel"]
    assert k["status"] == "ok" and k["data"]["labels"] == ["base", "+0001+0002", "base#2"]  # +0001 unchanged
    assert k["data"]["cases"] and all(c["params"].startswith("hsk=256,hsv=256,") for c in k["data"]["cases"])
    md = (run / "report.md").read_text()
    assert "`--changed`: `+0001+0002` changed since" in md
    assert "`--changed`: `+0001`: not measured: unchanged since its last build" in md
    assert "`--changed`: `base`: not tested again, timed again as the reference" in md
    assert again.returncode == 2 and "started with --changed" in again.stderr and "applied" not in again.stdout


def test_a_bad_affects_rule_is_refused_before_the_run_folder_is_made(cpu_build, work, cli, tmp_path):
    proj = _edited_project(tmp_path)
    recipe = proj / "recipes" / "default.toml"
    recipe.write_text(recipe.read_text().replace("params = 'hsk={DKQ},hsv={DV},'", "params = 'hsk={nosuch},'"))
    run = work.runs("seed-fattn") / "ci-changed-bad"
    shutil.rmtree(run, ignore_errors=True)
    args = ["--recipe", str(recipe), "--backend", "cpu", "--work", str(work.root), "--run", "ci-changed-bad"]
    try:
        r = cli("run", *args, "--changed", check=False)
    finally:
        cli("build", "--backend", "cpu", "--work", str(work.root), "-j", "2")
    assert r.returncode == 2
    assert "affects[0].params: {nosuch} is not a column of GGML_CUDA_FATTN_MMA_CONFIG_CASE" in r.stderr
    assert not run.exists()
