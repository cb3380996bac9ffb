"""Points of a sweep on the real header: the grid, names, the reference, keys, and patch bytes that
are the same every time and that `git am` applies (real git, on a repository holding the header)."""

from __future__ import annotations

import re
from pathlib import Path

from patchkit import vcs
from patchkit.build import table
from patchkit.sweep import points
from patchkit.sweep.spec import load_spec, parse_sweep

ROOT = Path(__file__).resolve().parents[2]
HEADER_FILE = ROOT / "tests" / "fixtures" / "sweep" / "fattn-mma-f16.cuh"
HEADER = HEADER_FILE.read_bytes().decode("utf-8", "surrogateescape")
SEED_PATCH = next((ROOT / "patches").glob("0002-*.patch")).read_text()
PATH = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"


def spec(**changes):
    base = {
        "file": PATH,
        "function": "ggml_cuda_fattn_mma_get_config_ampere",
        "row": {"DKQ": 256, "DV": 256, "ncols": 8},
        "params": {"nthreads": [128, 64], "occupancy": [2, 4], "nbatch_fa": [64, 32]},
        "constraints": ["nthreads * occupancy == 256"],
        "start": "+0001",
    }
    return parse_sweep({**base, **changes}, "s.toml: sweep")


def test_grid_order_names_and_the_reference_first():
    plan = points.plan(spec(), HEADER, start_key="k")
    assert [p.name for p in plan.points] == [
        "nthreads128-occupancy2-nbatch_fa64",
        "nthreads128-occupancy2-nbatch_fa32",
        "nthreads64-occupancy4-nbatch_fa64",
        "nthreads64-occupancy4-nbatch_fa32",
    ]
    assert (plan.combinations, plan.excluded) == (8, 4)
    ref = plan.reference
    assert ref.reference and ref.patch == b"" and ref.row["nthreads"] == 128
    assert all(not p.reference and p.patch for p in plan.points[1:])
    assert plan.point("nthreads64-occupancy4-nbatch_fa32").row == {
        **ref.row,
        "nthreads": 64,
        "occupancy": 4,
        "nbatch_fa": 32,
    }


def test_the_seed_authors_tried_and_dropped_list_as_points():
    # nstages 1; smaller K/V tiles (64 half2 instead of 128); the 32-column config is another row (another spec)
    s = spec(params={}, constraints=[], points=[{"nstages_target": 1}, {"nbatch_K2": 64, "nbatch_V2": 64}])
    plan = points.plan(s, HEADER, start_key="k")
    assert [p.name for p in plan.points] == [
        "nstages_target2-nbatch_K2128-nbatch_V2128",
        "nstages_target1-nbatch_K2128-nbatch_V2128",
        "nstages_target2-nbatch_K264-nbatch_V264",
    ]
    s32 = spec(row={"DKQ": 256, "DV": 256, "ncols": 32}, params={"nthreads": [64]}, constraints=[])
    [ref, p64] = points.plan(s32, HEADER, start_key="k").points
    assert (ref.name, p64.name) == ("nthreads128", "nthreads64")


def test_explicit_points_are_not_filtered_by_the_constraints():
    plan = points.plan(spec(points=[{"nthreads": 544}]), HEADER, start_key="k")
    assert plan.points[-1].name == "nthreads544-occupancy2-nbatch_fa64"


def test_patch_bytes_are_deterministic_and_the_diff_is_gits_own():
    a = points.plan(spec(), HEADER, start_key="k").point("nthreads64-occupancy4-nbatch_fa32")
    b = points.plan(spec(), HEADER, start_key="k").point("nthreads64-occupancy4-nbatch_fa32")
    assert a.patch == b.patch and a.key == b.key
    text = a.patch.decode()
    assert text.startswith("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    assert f"From: {points.AUTHOR}\nDate: {points.DATE}\n" in text
    assert "Subject: [PATCH] ggml_cuda_fattn_mma_get_config_ampere(256, 256, 8): nthreads 64, occupancy 4, " in text
    # the seed port's patch 0002 makes the same change; its diff was written by git format-patch
    seed_diff = SEED_PATCH[SEED_PATCH.index("diff --git") :]
    ours = text[text.index("diff --git") : text.index("-- \npatchkit sweep")]
    assert ours == seed_diff


def test_keys_follow_the_start_variant_and_the_patch():
    p1 = points.plan(spec(), HEADER, start_key="k1")
    p2 = points.plan(spec(), HEADER, start_key="k2")
    assert [p.patch for p in p1.points] == [p.patch for p in p2.points]
    assert {p.key for p in p1.points}.isdisjoint(p.key for p in p2.points)
    assert len({p.key for p in p1.points}) == len(p1.points)
    assert p1.points[1].key == points.point_key("k1", p1.points[1].patch)
    # the same change in another sweep (another name, other parameters around it): the same key
    other_sweep = points.plan(
        spec(name="other", params={"nthreads": [64], "occupancy": [4], "nbatch_fa": [32]}, constraints=[]),
        HEADER,
        start_key="k1",
    )
    assert other_sweep.points[1].key == p1.point("nthreads64-occupancy4-nbatch_fa32").key
    # another header (e.g. a rebased base): other patch bytes, another key for the same values
    other = HEADER.replace(
        "GGML_CUDA_FATTN_MMA_CONFIG_CASE(192, 128, 64, 128", "GGML_CUDA_FATTN_MMA_CONFIG_CASE(192, 128, 64, 256"
    )
    p3 = points.plan(spec(), other, start_key="k1")
    assert p3.points[1].name == p1.points[1].name and p3.points[1].key != p1.points[1].key


def _repo_with_header(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / Path(PATH).parent).mkdir(parents=True)
    (repo / PATH).write_bytes(HEADER_FILE.read_bytes())
    vcs.git(tmp_path, "init", "-q", str(repo), check=True)
    vcs.git(repo, "add", PATH, check=True)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
    }
    vcs.git(repo, "commit", "-q", "-m", "header", env=env, check=True)
    return repo


def test_every_patch_applies_with_git_am_and_gives_the_rewritten_header(tmp_path):
    repo = _repo_with_header(tmp_path)
    start = vcs.git(repo, "rev-parse", "HEAD", check=True).text
    plan = points.plan(spec(points=[{"Q_in_reg": False}]), HEADER, start_key="k")
    commits = {}
    for p in plan.points[1:]:
        f = tmp_path / f"{p.name}.patch"
        f.write_bytes(p.patch)
        vcs.git(repo, "checkout", "-q", "--detach", "--force", start, check=True)
        r = vcs.git(repo, "am", "--keep-cr", "--committer-date-is-author-date", str(f))
        assert r.ok, r.output
        got = (repo / PATH).read_text()
        assert got == table.rewrite_row(HEADER, plan.table, plan.row, p.row)
        assert vcs.git(repo, "log", "-1", "--format=%an <%ae>|%aD", check=True).text == f"{points.AUTHOR}|{points.DATE}"
        commits[p.name] = vcs.git(repo, "rev-parse", "HEAD", check=True).text
    # fixed author, committer and dates: applying again gives the same commits
    for p in plan.points[1:]:
        vcs.git(repo, "checkout", "-q", "--detach", "--force", start, check=True)
        vcs.git(
            repo, "am", "--keep-cr", "--committer-date-is-author-date", str(tmp_path / f"{p.name}.patch"), check=True
        )
        assert vcs.git(repo, "rev-parse", "HEAD", check=True).text == commits[p.name]


def test_unified_diff_at_the_ends_of_a_file():
    old = "a\nb\nc\n"
    d = points.unified_diff("f", old, "A\nb\nc\n")
    assert d.endswith("@@ -1,3 +1,3 @@\n-a\n+A\n b\n c\n")
    d = points.unified_diff("f", "x\ny", "x\nz")
    assert d.endswith("@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+z\n\\ No newline at end of file\n")


def test_the_specs_in_docs_sweep_md_parse_and_plan(tmp_path):
    docs = (ROOT / "docs" / "sweep.md").read_text()
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", docs, re.S) if b.startswith("[sweep]")]
    assert len(blocks) == 3
    names = []
    for i, b in enumerate(blocks):
        (tmp_path / f"{i}.toml").write_text(b)
        plan = points.plan(load_spec(tmp_path / f"{i}.toml"), HEADER, start_key="k")
        names.append([p.name for p in plan.points])
    assert names[1] == [
        "nstages_target2-nbatch_K2128-nbatch_V2128",
        "nstages_target1-nbatch_K2128-nbatch_V2128",
        "nstages_target2-nbatch_K264-nbatch_V264",
        "nstages_target1-nbatch_K264-nbatch_V264",
    ]
    assert names[2] == ["nthreads128", "nthreads64"]
