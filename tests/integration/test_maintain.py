"""rebase / refresh / newest-base on two real llama.cpp bases (llama-cpp-python 0.3.36 and 0.3.35 sdists), real git."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import git
import pytest

from patchkit import source, vendored
from patchkit.maintain import bases, trial
from patchkit.recipe import load_recipe, parse_recipe
from patchkit.workspace import Workspace

from .conftest import ROOT, copy_cache

V36 = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
V35 = "4df29be4f4c3673f428170fda944a5b19f743bb8"
SHA36 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SHA35 = "1139dbb54509074b70893fab8554e3b079aa9f4d312058ce4018ef0019e3de12"
PRUNE = 'prune = ["models", "docs", "media", "tools/ui", ".github"]'

BASE35_TOML = f"""
[base]
source = "sdist"
upstream = "ggml-org/llama.cpp@{V35}"
{PRUNE}

[base.sdist]
name = "llama-cpp-python"
version = "0.3.35"
sha256 = "{SHA35}"
"""

TOY36 = f"""
[recipe]
name = "toy-maint36"

[base]
source = "sdist"
upstream = "ggml-org/llama.cpp@{V36}"
{PRUNE}

[base.sdist]
name = "llama-cpp-python"
version = "0.3.36"
sha256 = "{SHA36}"
"""

TOY35 = '[recipe]\nname = "toy-maint35"\n' + BASE35_TOML

FATTN = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"


@pytest.fixture(scope="session")
def base35(work) -> source.BaseInfo:
    """llama-cpp-python 0.3.35's vendored llama.cpp (downloaded once per cache, imported once per session)."""
    return source.fetch(parse_recipe(BASE35_TOML, Path("b35.toml")).base, work)


def _git_env() -> dict:
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
    }


def _cache_git(work: Workspace, *args: str, env: dict | None = None, input: bytes | None = None, raw: bool = False):
    r = subprocess.run(
        ["git", *args],
        env={**_git_env(), "GIT_DIR": str(work.repo), **(env or {})},
        input=input,
        capture_output=True,
        check=True,
    )
    return r.stdout if raw else r.stdout.decode().strip()


def make_patch(work: Workspace, commit: str, changes: dict[str, str], subject: str) -> str:
    """A real `git format-patch` of a commit on `commit` that gives the files `changes`' contents
    (made with a scratch index: no checkout of the whole tree)."""
    with tempfile.TemporaryDirectory() as tmp:
        idx = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _cache_git(work, "read-tree", commit, env=idx)
        for path, text in changes.items():
            sha = _cache_git(work, "hash-object", "-w", "--stdin", input=text.encode())
            _cache_git(work, "update-index", "--add", "--cacheinfo", f"100644,{sha},{path}", env=idx)
        tree = _cache_git(work, "write-tree", env=idx)
    new = _cache_git(work, "commit-tree", tree, "-p", commit, "-m", subject)
    return _cache_git(work, "format-patch", "--stdout", "-1", new, raw=True).decode()


def replace(work: Workspace, commit: str, rel: str, *pairs: tuple[str, str]) -> dict[str, str]:
    s = blob(work, commit, rel)
    for old, new in pairs:
        assert old in s, f"{old!r} not in {rel}"
        s = s.replace(old, new, 1)
    return {rel: s}


def blob(work: Workspace, commit: str, path: str) -> str:
    return _cache_git(work, "cat-file", "blob", f"{commit}:{path}", raw=True).decode()


def copy_project(tmp: Path, name: str) -> Path:
    """The repo's default recipe and patches in a throwaway project, under another recipe name."""
    proj = tmp / "proj"
    shutil.copytree(ROOT / "patches", proj / "patches")
    (proj / "recipes").mkdir(parents=True)
    text = (ROOT / "recipes" / "default.toml").read_text()
    assert 'name = "seed-fattn"' in text
    # the series these tests were written for: the two PR patches and the first local test patch (the
    # local timing patches added later, 0002 to 0004, need that one and conflict with it on 0.3.35; 0005,
    # the build-only split of the MMA instances, was generated from the pinned base's tree; 0006 to 0008, the
    # phases and the fast fill, are made on top of 0003 and 0004): every local patch but 0001 taken out
    later = re.findall(r'\n\[\[series\]\]\nfile = "(patches/local/[^"]*)"\nid = "[^"]*"\nlocal = true\n', text)
    assert later[0] == "patches/local/0001-tests-fattn-perf-cases-seed-shapes.patch" and len(later) >= 7
    for f in later[1:]:
        text = re.sub(rf'\n\[\[series\]\]\nfile = "{re.escape(f)}"\nid = "[^"]*"\nlocal = true\n', "\n", text)
        assert f not in text
    (proj / "recipes" / "default.toml").write_text(text.replace('name = "seed-fattn"', f'name = "{name}"', 1))
    return proj


def rebase_json(work: Workspace, recipe: str, commit: str) -> dict:
    return json.loads((work.root / "rebase" / f"{recipe}-{commit}.json").read_text())


# ---------------------------------------------------------------------------------------------


def test_the_two_sdists_vendor_different_llama_cpp_commits(base, base35, work):
    assert base.commit == V36 and base35.commit == V35
    assert base35.upstream_verified  # the sdist's .git/modules HEAD, and its files are exactly that commit's tree
    assert bases.sdist_vendored_commit(work.sdist("llama_cpp_python-0.3.35.tar.gz"), "vendor/llama.cpp") == V35
    assert bases.sdist_vendored_commit(work.sdist("llama_cpp_python-0.3.36.tar.gz"), "vendor/llama.cpp") == V36
    repo = source.open_cache_repo(work)
    assert repo.run("diff", "--name-only", V35, V36, "--", FATTN) == FATTN


def test_sha256_from_pypi_index():
    sd = parse_recipe(BASE35_TOML, Path("b35.toml")).base.sdist
    sha, url = bases.pypi_sdist_sha256(sd)
    assert sha == SHA35
    assert url == "https://pypi.org/simple/llama-cpp-python/"
    assert vendored.by_version("0.3.35").sha256 == SHA35  # patchkit's table says what PyPI says


def test_rebase_default_series_onto_0_3_35(base, base35, work, cli, tmp_path):
    """The seed series on the other real base: every patch tried, the conflicts named by file and hunk."""
    proj = copy_project(tmp_path, "seed-fattn-rb")
    r = cli("rebase", "--work", str(work.root), "--onto", "sdist:0.3.35", cwd=proj, check=False)  # sha256 from PyPI
    assert r.returncode == 1, r.stderr  # conflicts: not ok, but the report is there
    data = rebase_json(work, "seed-fattn-rb", V35)
    by_id = {p["id"]: p for p in data["patches"]}
    assert [p["id"] for p in data["patches"]] == ["perf-cases", "0001", "0002"]  # local first, as in the variants
    assert by_id["perf-cases"]["status"] == "conflict"
    assert by_id["perf-cases"]["hunks"] == [
        {"file": "tests/test-backend-ops.cpp", "index": 1, "header": by_id["perf-cases"]["hunks"][0]["header"]}
    ]
    assert by_id["perf-cases"]["hunks"][0]["header"].startswith("@@ -11659,6 +11659,15 @@")
    # the conflict of the first patch did not stop the trial
    assert by_id["0001"]["status"] == "clean" and by_id["0001"]["commit"]
    assert by_id["0002"]["status"] == "conflict"
    assert [(h["file"], h["index"]) for h in by_id["0002"]["hunks"]] == [(FATTN, 1)]
    assert by_id["0002"]["hunks"][0]["header"].startswith("@@ -66,7 +66,7 @@")
    assert "fattn-mma-f16.cuh" in by_id["0002"]["detail"] and "hunk #1" in by_id["0002"]["detail"]
    assert data["summary"] == {"clean": 1, "3way": 0, "upstream": 0, "conflict": 2}
    assert data["new_base"]["commit"] == V35 and data["old_base"]["commit"] == V36
    # 0.3.35 is in patchkit's table of vendored commits (vendored.py): its sha256 comes from there
    # (test_sha256_from_pypi_index checks the index's answer is the same), so the route works offline
    assert (
        data["provenance"]["sha256_from"].startswith("patchkit's table") and data["new_base"]["sdist_sha256"] == SHA35
    )
    # 0001 went onto the bare new base (the local patch did not apply)
    repo = source.open_cache_repo(work)
    assert data["new_commits"] == [by_id["0001"]["commit"]]
    assert repo.run("rev-parse", f"{by_id['0001']['commit']}^") == V35
    assert len(data["old_commits"]) == 3
    # the range-diff pairs 0001 with its rebased commit and shows the two that did not come along
    rd = data["range_diff"]
    assert "cuda: use the MMA FA kernel" in rd and " = " in rd
    assert rd.count(" < ") == 2
    # the table
    lines = r.stdout.splitlines()
    row = next(ln for ln in lines if ln.strip().startswith("0002 "))
    assert "conflict" in row and FATTN in row and "hunk #1" in row
    assert any(ln.strip().startswith("0001 ") and "clean" in ln for ln in lines)
    # --write is refused, naming the conflicting patches, and writes nothing
    w = cli("rebase", "--work", str(work.root), "--onto", f"sdist:0.3.35:{SHA35}", "--write", cwd=proj, check=False)
    assert w.returncode == 2
    err = w.stderr.strip().splitlines()[-1]
    assert (
        err.startswith("patchkit: error: --write refused")
        and "0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch" in err
        and "0001-tests-fattn-perf-cases" in err
    )
    assert sorted(p.name for p in proj.iterdir()) == ["patches", "recipes"]
    assert [p.name for p in (proj / "recipes").iterdir()] == ["default.toml"]


def test_conflict_with_its_hunk_and_later_patches_still_tried(base, base35, work, toy_project, cli, tmp_path):
    fattn36 = blob(work, V36, FATTN)
    assert blob(work, V35, "ggml/src/ggml-cuda/acc.cu") == blob(
        work, V36, "ggml/src/ggml-cuda/acc.cu"
    )  # patch 2's file: same on both
    line_512_16 = (
        "GGML_CUDA_FATTN_MMA_CONFIG_CASE(512, 512, 16, 256, 1,  64, 128, 128, 128, 1, false);"  # differs on 0.3.35
    )
    line_320_32 = (
        "GGML_CUDA_FATTN_MMA_CONFIG_CASE(320, 256, 32, 128, 2,  32, 128, 128, 128, 1, false);"  # its neighbours differ
    )
    assert fattn36.index(line_512_16) > fattn36.index(line_320_32) and line_512_16 not in blob(work, V35, FATTN)

    # patch 1, two hunks: the top of the file (same on both bases) and the 512 line (not the same)
    p1 = make_patch(
        work,
        V36,
        replace(
            work,
            V36,
            FATTN,
            ('#include "common.cuh"', '// toy: top of file\n#include "common.cuh"'),
            (line_512_16, line_512_16.replace("1,  64, 128", "1,  32, 128")),
        ),
        "toy: conflicting on 0.3.35",
    )
    p2 = make_patch(
        work,
        V36,
        replace(work, V36, "ggml/src/ggml-cuda/acc.cu", ('#include "acc.cuh"', '// toy: acc\n#include "acc.cuh"')),
        "toy: clean on both",
    )
    p3 = make_patch(
        work, V36, replace(work, V36, FATTN, (line_320_32, line_320_32 + " // toy: 3-way")), "toy: needs a 3-way merge"
    )
    recipe = TOY36 + "".join(f'\n[[series]]\nfile = "patches/000{i}-toy.patch"\n' for i in (1, 2, 3))
    proj = toy_project(
        recipe, {"patches/0001-toy.patch": p1, "patches/0002-toy.patch": p2, "patches/0003-toy.patch": p3}
    )
    r = cli("rebase", "-r", "toy", "--work", str(work.root), "--onto", f"sdist:0.3.35:{SHA35}", cwd=proj, check=False)
    assert r.returncode == 1, r.stderr
    data = rebase_json(work, "toy-maint36", V35)
    st = {p["id"]: p for p in data["patches"]}
    assert [st[k]["status"] for k in ("0001", "0002", "0003")] == ["conflict", "clean", "3way"]
    # only the hunk that does not apply is named: #2 of fattn-mma-f16.cuh, not the one at the top of the file
    assert [(h["file"], h["index"]) for h in st["0001"]["hunks"]] == [(FATTN, 2)]
    assert st["0001"]["hunks"][0]["header"].startswith("@@ -")
    assert st["0001"]["files"] == [FATTN]
    # patches 2 and 3 are on the new base, without patch 1
    repo = source.open_cache_repo(work)
    assert repo.run("rev-parse", f"{st['0002']['commit']}^") == V35
    assert repo.run("rev-parse", f"{st['0003']['commit']}^") == st["0002"]["commit"]
    merged = repo.run("show", f"{st['0003']['commit']}:{FATTN}")
    assert "// toy: 3-way" in merged and line_512_16 not in merged and "toy: top of file" not in merged
    row = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("0001 "))
    assert "conflict" in row and f"{FATTN} hunk #2" in row


def test_upstream_patch_detected_and_write(base, base35, work, toy_project, cli, tmp_path):
    """A patch that turns 0.3.35's AGENTS.md into 0.3.36's is 'upstream' on 0.3.36; --write drops it."""
    agents36 = blob(work, V36, "AGENTS.md")
    assert agents36 != blob(work, V35, "AGENTS.md")
    p1 = make_patch(work, V35, {"AGENTS.md": agents36}, "docs: AGENTS.md as upstream has it")
    p2 = make_patch(
        work,
        V35,
        replace(work, V35, "ggml/src/ggml-cuda/acc.cu", ('#include "acc.cuh"', '// toy\n#include "acc.cuh"')),
        "toy: acc comment",
    )
    recipe = (
        TOY35
        + """
[[series]]
file = "patches/0001-agents.patch"

[[series]]
file = "patches/0002-acc.patch"
depends-on = ["0001"]

[prose]
overview = '''
Two toy patches.
[[series]]
file = "this is prose, not a table"
'''
"""
    )
    proj = toy_project(recipe, {"patches/0001-agents.patch": p1, "patches/0002-acc.patch": p2})
    r = cli(
        "rebase",
        "-r",
        "toy",
        "--work",
        str(work.root),
        "--onto",
        "sdist:0.3.36",
        "--sha256",
        SHA36,
        "--write",
        cwd=proj,
    )
    data = rebase_json(work, "toy-maint35", V36)
    assert [p["status"] for p in data["patches"]] == ["upstream", "clean"]
    assert data["ok"] and data["written"]["dropped"] == ["patches/0001-agents.patch"]
    assert "upstream" in r.stdout and "dropped patches/0001-agents.patch" in r.stdout
    short = V36[:12]
    new_recipe = proj / "recipes" / f"toy-maint35-{short}.toml"
    assert data["written"]["recipe"] == str(new_recipe)
    rec = load_recipe(str(new_recipe))
    assert rec.name == f"toy-maint35-{short}"
    assert [p.file for p in rec.series] == [f"patches-{short}/0002-acc.patch"]
    assert rec.series[0].depends_on == ()  # its dependency is upstream now
    assert rec.base.sdist.version == "0.3.36" and rec.base.sdist.sha256 == SHA36 and rec.base.upstream.endswith(V36)
    assert "this is prose, not a table" in rec.prose.overview  # prose kept as it was
    # the user's patches are untouched; the new one is the commit made on 0.3.36, re-exported
    assert (proj / "patches" / "0002-acc.patch").read_text() == p2
    new_patch = proj / f"patches-{short}" / "0002-acc.patch"
    assert new_patch.read_bytes() == trial.export_patch(
        trial.trial_tree(work, parse_recipe(recipe, proj / "recipes" / "toy.toml")), data["patches"][1]["commit"]
    )
    text = new_patch.read_text()
    assert (
        text.startswith("From 0000000000000000000000000000000000000000 ")
        and "Subject: [PATCH] toy: acc comment" in text
    )
    # and it applies to the new base
    tree = trial.trial_tree(work, parse_recipe(recipe, proj / "recipes" / "toy.toml"))
    wt = git.Repo(tree)
    wt.git.reset("--hard", V36)
    wt.git.apply("--check", str(new_patch))


def test_refresh_is_byte_identical_then_rewrites_only_the_edited_patch(base, work, cli, tmp_path):
    name = "seed-fattn-refresh"
    proj = copy_project(tmp_path, name)
    originals = {p: p.read_bytes() for p in (proj / "patches").rglob("*.patch")}
    w = ["--work", str(work.root), "--offline"]
    cli("apply", *w, "--force", cwd=proj)
    r = cli("refresh", *w, cwd=proj)
    assert "0 file(s) changed, 3 unchanged" in r.stdout
    assert {p: p.read_bytes() for p in (proj / "patches").rglob("*.patch")} == originals

    # an edit committed on the whole-series tree, into the last patch's commit
    tree = work.variants(name) / "+0001+0002"
    wt = git.Repo(tree)
    f = tree / FATTN
    f.write_text(f.read_text().replace('#include "common.cuh"', '// refreshed edit\n#include "common.cuh"', 1))
    wt.git.add(FATTN)
    wt.git.execute(
        ["git", "commit", "-q", "--amend", "--no-edit"],
        env={**os.environ, "GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@x"},
    )
    edited_head = wt.git.rev_parse("HEAD")
    r = cli("refresh", *w, cwd=proj)
    assert "updated: patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch" in r.stdout
    assert "1 file(s) changed, 2 unchanged" in r.stdout
    now = {p: p.read_bytes() for p in (proj / "patches").rglob("*.patch")}
    changed = [p.name for p in now if now[p] != originals[p]]
    assert changed == ["0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch"]
    new2 = (proj / "patches" / "0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch").read_text()
    assert "+// refreshed edit" in new2 and new2.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] cuda: FA MMA config for head size 256" in new2
    # refresh recorded the tree: apply finds it up to date and keeps the edit
    again = cli("apply", *w, cwd=proj)
    assert "+0001+0002: up to date" in again.stdout
    assert wt.git.rev_parse("HEAD") == edited_head
    # the new file applies: rebuilt from the patch files, the variant has the edited tree
    (work.variants(name) / "+0001+0002.json").unlink()
    cli("apply", *w, "--force", "--variant", "+0001+0002", cwd=proj)
    assert wt.git.rev_parse("HEAD^{tree}") == wt.git.rev_parse(f"{edited_head}^{{tree}}")
    # a second refresh changes nothing
    assert "0 file(s) changed" in cli("refresh", *w, cwd=proj).stdout

    # a new commit on top becomes a new patch file and a new [[series]] table
    (tree / "ggml/src/ggml-cuda/acc.cu").write_text("// new patch\n" + (tree / "ggml/src/ggml-cuda/acc.cu").read_text())
    wt.git.add("-A")
    wt.git.execute(["git", "commit", "-q", "-m", "cuda: acc comment"], env=_git_env())
    r = cli("refresh", *w, cwd=proj)
    assert "new: patches/0003-cuda-acc-comment.patch" in r.stdout
    rec = load_recipe(str(proj / "recipes" / "default.toml"))
    assert [p.key for p in rec.pr_patches] == ["0001", "0002", "0003"]
    assert rec.prose.overview and rec.series[-1].local  # the rest of the recipe is as it was
    again = cli("apply", *w, cwd=proj)
    assert "+0001+0002+0003: up to date" in again.stdout


def test_newest_base(base, base35, work, cli, tmp_path):
    proj = copy_project(tmp_path, "seed-fattn-newest")
    w = ["--work", str(work.root), "--offline"]
    r = cli("newest-base", *w, "--candidates", f"sdist:0.3.35:{SHA35}", f"sdist:0.3.36:{SHA36}", cwd=proj)
    assert f"newest base: sdist:0.3.36:{SHA36} ({V36[:12]})" in r.stdout
    data = json.loads((work.root / "rebase" / "seed-fattn-newest-newest-base.json").read_text())
    assert [c["applies"] for c in data["candidates"]] == [False, True]
    assert [p["status"] for p in data["candidates"][0]["patches"]] == ["conflict", "clean", "conflict"]
    r = cli("newest-base", *w, "--candidates", f"sdist:0.3.35:{SHA35}", cwd=proj, check=False)
    assert r.returncode == 1 and "none of the 1 candidates" in r.stdout


def test_rebase_onto_a_git_commit(base, base35, work, cli, tmp_path):
    """The git route for the new base: fetched (depth 1) from a git URL, here the session cache repo."""
    ws = copy_cache(work, tmp_path / "w")
    proj = copy_project(tmp_path, "seed-fattn-git")
    r = cli("rebase", "--work", str(ws.root), "--onto", V35, "--git-url", str(work.repo), cwd=proj, check=False)
    assert r.returncode == 1, r.stderr
    data = rebase_json(ws, "seed-fattn-git", V35)
    assert data["new_base"]["route"] == "git" and data["new_base"]["commit"] == V35
    assert [p["status"] for p in data["patches"]] == ["conflict", "clean", "conflict"]


def test_rebase_build_reports_each_prefix(base, base35, work, toy_project, cli, tmp_path):
    """--build goes through the ordinary build code for the new base and every prefix; a build that
    fails is reported per variant (here at configure time, with a compiler that does not exist, so
    that the test does not compile llama.cpp)."""
    p1 = make_patch(
        work,
        V36,
        replace(work, V36, "ggml/src/ggml-cuda/acc.cu", ('#include "acc.cuh"', '// toy\n#include "acc.cuh"')),
        "toy: acc",
    )
    recipe = (
        TOY36.replace('name = "toy-maint36"', 'name = "toy-maint-build"')
        + '\n[[series]]\nfile = "patches/0001-toy.patch"\n'
    )
    proj = toy_project(recipe, {"patches/0001-toy.patch": p1})
    r = cli(
        "rebase",
        "-r",
        "toy",
        "--work",
        str(work.root),
        "--offline",
        "--onto",
        f"sdist:0.3.35:{SHA35}",
        "--build",
        "-D",
        "CMAKE_C_COMPILER=/nonexistent/cc",
        cwd=proj,
        check=False,
    )
    assert r.returncode == 1, r.stderr
    data = rebase_json(work, "toy-maint-build", V35)
    assert data["build"]["backend"] == "cpu"  # CPU unless --backend cuda
    builds = data["build"]["builds"]
    assert sorted(builds) == ["+0001", "base"]
    assert all(not b["ok"] and "configure failed" in b["error"] for b in builds.values())
    assert data["patches"][0]["status"] == "clean" and data["patches"][0]["build"]["variant"] == "+0001"
    row = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("0001 "))
    assert "clean" in row and "FAIL" in row
