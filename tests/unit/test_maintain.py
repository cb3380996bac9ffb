"""patchkit.maintain on small things: base arguments, the recipe rewrite (tomlkit), hunk splitting, and
the per-patch trial on a tiny real git repo (clean, 3way, upstream, conflict)."""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
from pathlib import Path

import pytest

from patchkit import source, vcs
from patchkit.cli import maintain as cli_maintain
from patchkit.errors import RecipeError
from patchkit.maintain import bases, rebase, recipe_edit, trial
from patchkit.parsers.patch import parse_hunks, split_hunks
from patchkit.recipe import Base, GitBase, Patch, SdistBase, parse_recipe
from patchkit.workspace import Workspace
from tests.conftest import default_local, git, patchkit_main

ROOT = Path(__file__).resolve().parents[2]
SHA_A = "a" * 40
SHA_B = "b" * 40


# ---------------------------------------------------------------------------------------------
# arguments


def test_parse_onto():
    assert bases.parse_onto("sdist:0.3.35") == bases.Onto(kind="sdist", version="0.3.35", text="sdist:0.3.35")
    o = bases.parse_onto("sdist:0.3.35:" + "AB" * 32)
    assert o.sha256 == "ab" * 32 and o.version == "0.3.35"
    assert bases.parse_onto(SHA_A.upper()).commit == SHA_A
    for bad in ("0c1e570", "master", "sdist:", "sdist:0.3.35:123", "v1.0"):
        with pytest.raises(RecipeError):
            bases.parse_onto(bad)


def test_new_patch_path():
    assert rebase.new_patch_path("patches/0001-x.patch", "abc") == "patches-abc/0001-x.patch"
    assert rebase.new_patch_path("patches/local/0001-y.patch", "abc") == "patches-abc/local/0001-y.patch"
    assert rebase.new_patch_path("patches-old/0001-x.patch", "abc") == "patches-abc/0001-x.patch"
    assert rebase.new_patch_path("series/0001-x.patch", "abc") == "patches-abc/series/0001-x.patch"


# ---------------------------------------------------------------------------------------------
# the recipe rewrite keeps everything but what changed


def _default_text() -> str:
    return (ROOT / "recipes" / "default.toml").read_text()


def _prose_and_rest(text: str) -> str:
    """Everything from [build] on: untouched by a rebase."""
    return text[text.index("\n[build]") :]


def test_rewrite_recipe_onto_another_sdist_keeps_prose_and_comments():
    text = _default_text()
    base = Base(
        source="sdist",
        upstream=f"ggml-org/llama.cpp@{SHA_B}",
        git=GitBase(url="https://github.com/ggml-org/llama.cpp.git", commit=SHA_B),
        sdist=SdistBase(name="llama-cpp-python", version="0.3.35", sha256="c" * 64),
        prune=("models",),
    )
    files = {
        p.file: p.file.replace("patches/", "patches-bbbbbbbbbbbb/", 1)
        for p in parse_recipe(text, Path("recipes/default.toml"), root=ROOT).series
    }
    prov = {"sha256_from": "index", "index_url": "https://pypi.org/simple/llama-cpp-python/"}
    out = recipe_edit.rewrite_recipe(
        text, name="seed-fattn-bbbbbbbbbbbb", base=base, files=files, dropped={}, note="Rebased for a test.", prov=prov
    )
    r = parse_recipe(out, Path("recipes/x.toml"), root=ROOT)
    orig = parse_recipe(text, Path("recipes/default.toml"), root=ROOT)
    assert r.name == "seed-fattn-bbbbbbbbbbbb"
    assert r.base.route == "sdist" and r.base.sdist.version == "0.3.35" and r.base.sdist.sha256 == "c" * 64
    assert r.base.upstream == f"ggml-org/llama.cpp@{SHA_B}" and r.base.git.commit == SHA_B
    assert r.base.prune == orig.base.prune  # the recipe's own keys, not the Base object's
    assert [p.file for p in r.series] == [files[p.file] for p in orig.series]
    assert [(p.key, p.depends_on, p.local) for p in r.series] == [(p.key, p.depends_on, p.local) for p in orig.series]
    assert r.prose == orig.prose and r.build == orig.build and r.suites == orig.suites and r.model == orig.model
    assert _prose_and_rest(out) == _prose_and_rest(text)  # byte for byte, comments included
    assert "# Real users: a git URL and a full commit." in out  # comments in the rewritten tables stay too
    assert out.startswith("# Rebased for a test.\n")
    lines = out.splitlines()
    sha_line = next(i for i, ln in enumerate(lines) if ln.startswith("sha256 = "))
    assert "JSON simple API" in lines[sha_line - 1] and "pypi.org/simple/llama-cpp-python" in lines[sha_line - 1]
    # a second rewrite of the rewritten recipe does not pile up provenance comments
    again = recipe_edit.rewrite_recipe(
        out, name="seed-fattn-bbbbbbbbbbbb", base=base, files={}, dropped={}, note="x", prov=prov
    )
    assert again.count("JSON simple API") == 1


def test_rewrite_recipe_onto_a_git_commit_drops_the_sdist_and_upstream_patches():
    text = _default_text()
    base = Base(
        source="git",
        upstream=f"ggml-org/llama.cpp@{SHA_B}",
        git=GitBase(url="https://example.invalid/llama.cpp.git", commit=SHA_B),
    )
    dropped = {"patches/0001-cuda-mma-fattn-gqa-quantized-kv.patch": "0001"}
    kept = [p for p in parse_recipe(text, Path("recipes/default.toml"), root=ROOT).series if p.key != "0001"]
    # each kept patch's new file: patches/0002-x.patch -> patches-b/0002.patch, patches/local/0001-y.patch ->
    # patches-b/local/0001.patch (every local patch the recipe lists: default_local())
    files = {p.file: re.sub(r"^patches/(local/)?(\d{4})-.*$", r"patches-b/\1\2.patch", p.file) for p in kept}
    assert [p.key for p in kept if p.local] == list(default_local())
    out = recipe_edit.rewrite_recipe(text, name="n", base=base, files=files, dropped=dropped, note="n", prov={})
    r = parse_recipe(out, Path("recipes/n.toml"), root=ROOT)
    assert (
        r.base.route == "git"
        and r.base.sdist is None
        and r.base.git.url == "https://example.invalid/llama.cpp.git"
        and r.base.git.commit == SHA_B
    )
    local = [re.search(r"patches/local/(\d{4})-", p.file)[1] for p in kept if p.local]
    assert local[:8] == ["0001", "0002", "0003", "0004", "0006", "0007", "0008", "0010"]  # DEFAULT_LOCAL's files
    assert [p.file for p in r.series] == ["patches-b/0002.patch", *(f"patches-b/local/{n}.patch" for n in local)]
    assert r.series[0].depends_on == ()  # 0001 is upstream now
    assert r.series[0].key == "0002"
    assert (
        "# already upstream in the new base" in out
        and '# file = "patches/0001-cuda-mma-fattn-gqa-quantized-kv.patch"' in out
    )
    assert '# version = "0.3.36"' in out  # the old sdist is there, commented out, not lost


def test_editor_ignores_lookalikes_inside_multiline_strings():
    text = '''[recipe]
name = "t"

[base]
upstream = "o/r@x"  # a comment that stays

[base.git]
url = "u"
commit = "SHA_A"

[[series]]
file = "patches/0001-a.patch"
depends-on = [
    "x",
]

[prose]
overview = """
[[series]]
file = "patches/0001-a.patch"
"""
notes = ['a # not a comment', "b"]
'''.replace("SHA_A", SHA_A)
    base = Base(source="git", upstream="o/r@" + SHA_B, git=GitBase(url="u", commit=SHA_B))
    out = recipe_edit.rewrite_recipe(
        text,
        name="t2",
        base=base,
        files={"patches/0001-a.patch": "patches-z/0001-a.patch"},
        dropped={"x": "x"},
        note="n",
        prov={},
    )
    assert f'upstream = "o/r@{SHA_B}"  # a comment that stays' in out
    assert out.count('file = "patches/0001-a.patch"') == 1  # the one inside the prose
    assert 'file = "patches-z/0001-a.patch"' in out
    assert "depends-on" not in out  # its only dependency was dropped
    assert out.endswith('"""\nnotes = [\'a # not a comment\', "b"]\n')


def test_rewrite_recipe_without_a_recipe_table_and_its_last_table_commented_out():
    text = f"""# opening comment

[base]
source = "git"
upstream = "o/r@{SHA_A}"

[base.git]
url = "u"
commit = "{SHA_A}"

[[series]]
file = "patches/0001-a.patch"
"""
    sd = SdistBase(name="llama-cpp-python", version="0.3.35", sha256="c" * 64)
    base = Base(source="sdist", upstream=f"o/r@{SHA_B}", sdist=sd)
    out = recipe_edit.rewrite_recipe(
        text, name="r2", base=base, files={}, dropped={"patches/0001-a.patch": "0001"}, note="n", prov={}
    )
    # the [recipe] table goes before the first table, after the file's opening comments
    assert out.startswith('# n\n# opening comment\n\n[recipe]\nname = "r2"\n\n[base]\nsource = "sdist"\n')
    r = parse_recipe(out, Path("recipes/r2.toml"), root=ROOT)
    assert r.name == "r2" and r.base.route == "sdist" and r.base.git is None and r.series == ()
    assert r.base.sdist.version == "0.3.35" and r.base.sdist.subdir == "vendor/llama.cpp"
    # the new sdist table goes after [base]; the old git table and the dropped patch (the file's last
    # table) are comments, in their places
    assert out.index("\n[base.sdist]\nname = ") < out.index('# commit = "' + SHA_A) < out.index("# [[series]]")
    assert out.endswith('# [[series]]\n# file = "patches/0001-a.patch"\n')


def test_add_series_after_the_last_pr_patch_keeps_every_other_line():
    text = _default_text().replace(
        '[[series]]\nfile = "patches/local', '# the local test patch\n[[series]]\nfile = "patches/local', 1
    )
    new = [Patch(file="patches/0003-x.patch", id="0003"), Patch(file="patches/0004-y.patch", id="0004")]
    out = recipe_edit.add_series(text, new, after=1)
    block = "".join(f'\n[[series]]\nfile = "{p.file}"\nid = "{p.id}"\n' for p in new)
    at = text.index('depends-on = ["0001"]\n') + len('depends-on = ["0001"]\n')
    assert out == text[:at] + block + text[at:]  # the comment before the local patch stays before it
    r = parse_recipe(out, Path("recipes/default.toml"), root=ROOT)
    assert [p.key for p in r.series] == ["0001", "0002", "0003", "0004", *default_local()]


def test_commands_parse_their_options():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    for cmd in cli_maintain.COMMANDS:
        cmd.add_arguments(sub.add_parser(cmd.name))
    a = parser.parse_args(["rebase", "--onto", "sdist:0.3.35", "--test", "--test", "flash_attn", "-D", "X=1"])
    assert a.onto == "sdist:0.3.35" and a.test == ["all", "flash_attn"] and a.cmake_option == ["X=1"]
    a = parser.parse_args(["newest-base", "--candidates", SHA_A, SHA_B, "--build", "--variant", "base"])
    assert a.candidates == [SHA_A, SHA_B] and a.build and a.variant == ["base"]
    assert parser.parse_args(["refresh", "--variant", "+0001"]).variant == "+0001"


# ---------------------------------------------------------------------------------------------
# hunks


PATCH_2FILES = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: t <t@t>
Subject: [PATCH] two files

---
diff --git a/a.txt b/a.txt
index 1111111..2222222 100644
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
@@ -10,2 +10,3 @@ ctx
 ten
+ten and a half
 eleven
diff --git a/b.txt b/b.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/b.txt
@@ -0,0 +1 @@
+new
\\ No newline at end of file
--
2.39.5

"""


def test_split_hunks_gives_standalone_patches():
    parts = split_hunks(PATCH_2FILES)
    assert [(h.file, h.index) for h, _ in parts] == [("a.txt", 1), ("a.txt", 2), ("b.txt", 1)]
    assert [h for h, _ in parts] == parse_hunks(PATCH_2FILES)
    first, second, third = (body for _, body in parts)
    assert first.startswith("diff --git a/a.txt b/a.txt\n") and "+TWO\n" in first and "ten and a half" not in first
    assert second.count("@@") == 2 and second.endswith(" eleven\n")
    assert third.endswith("+new\n\\ No newline at end of file\n") and "2.39.5" not in third


# ---------------------------------------------------------------------------------------------
# the trial on a tiny real repo


# fixed dates: the same edit gives the same commit; no git config of the user's
_run = functools.partial(
    git,
    env={
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
        **vcs.NEUTRAL_ENV,
    },
)


def _lines(n: int, **changed: str) -> str:
    return "".join(changed.get(f"l{i}", f"line {i}") + "\n" for i in range(1, n + 1))


@pytest.fixture
def tiny(tmp_path):
    """A source repo with base A and base B (B: line 10 and line 25 of f.txt changed), patches made on
    A, and a patchkit work folder whose cache repo holds both bases."""
    src = tmp_path / "src"
    src.mkdir()
    _run(src, "init", "-q", "-b", "main")
    (src / "f.txt").write_text(_lines(30))
    (src / "h.txt").write_text(_lines(10))
    _run(src, "add", "-A")
    _run(src, "commit", "-q", "-m", "A")
    a = _run(src, "rev-parse", "HEAD")
    patches = {}
    for name, file, changes in (
        ("0001-conflict", "f.txt", {"l10": "line 10 ours"}),  # B changed line 10 too
        ("0002-threeway", "f.txt", {"l12": "line 12 ours"}),  # B's line 10 is in its context; a 3-way merge takes both
        ("0003-upstream", "f.txt", {"l25": "line 25 upstream"}),  # B made this very change
        ("0004-clean", "h.txt", {"l3": "line 3 ours"}),
    ):
        _run(src, "checkout", "-q", "--detach", a)
        (src / file).write_text(_lines(30 if file == "f.txt" else 10, **changes))
        _run(src, "commit", "-q", "-am", f"toy {name}")
        p = tmp_path / "patches" / f"{name}.patch"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(
            subprocess.run(
                ["git", "format-patch", *trial.FORMAT_PATCH_OPTS, "--stdout", "-1", "HEAD"],
                cwd=src,
                capture_output=True,
                check=True,
            ).stdout
        )
        patches[name] = p
    _run(src, "checkout", "-q", "--detach", a)
    (src / "f.txt").write_text(_lines(30, l10="line 10 theirs", l25="line 25 upstream"))
    _run(src, "commit", "-q", "-am", "B")
    b = _run(src, "rev-parse", "HEAD")
    ws = Workspace.at(tmp_path / "work")
    source.open_cache_repo(ws)
    _run(ws.repo, "fetch", "-q", str(src), a, b)
    return ws, a, b, patches


def _items(patches: dict[str, Path]) -> list[tuple[Patch, Path]]:
    return [(Patch(file=f"patches/{p.name}"), p) for p in patches.values()]


def test_trial_classifies_every_patch_and_goes_on_after_a_conflict(tiny):
    ws, _, b, patches = tiny
    tree = ws.root / "rebase" / "trees" / "toy"
    res = trial.try_series(ws, tree, b, _items(patches))
    st = {r.id: r for r in res.results}
    assert [r.status for r in res.results] == ["conflict", "3way", "upstream", "clean"]
    assert st["0001"].hunks == [{"file": "f.txt", "index": 1, "header": "@@ -7,7 +7,7 @@ line 6"}]
    assert st["0001"].files == ["f.txt"] and st["0001"].merge_conflicts == ["f.txt"]
    assert "f.txt" in st["0001"].detail and not st["0001"].commit
    assert st["0003"].commit == "" and "already" in st["0003"].detail
    # the commits: 0002 on B, 0004 on top of it; the merged file has both sides
    assert res.commits == [st["0002"].commit, st["0004"].commit]
    assert _run(tree, "rev-parse", f"{st['0002'].commit}^") == b
    assert _run(tree, "rev-parse", f"{st['0004'].commit}^") == st["0002"].commit
    merged = _run(tree, "show", f"{st['0002'].commit}:f.txt")
    assert "line 10 theirs" in merged and "line 12 ours" in merged
    assert res.summary() == {"clean": 1, "3way": 1, "upstream": 1, "conflict": 1}
    # deterministic: the same trial makes the same commits
    again = trial.try_series(ws, tree, b, _items(patches))
    assert again.commits == res.commits
    # re-exported, the clean patch is byte for byte the file it came from
    assert trial.export_patch(tree, st["0004"].commit) == patches["0004-clean"].read_bytes()
    # the table names the hunk
    table = trial.render_table("t", res)
    assert (
        "f.txt hunk #1 (@@ -7,7 +7,7 @@ line 6)" in table
        and "summary: 1 clean, 1 3way, 1 upstream, 1 conflict" in table
    )


def test_range_diff_of_old_and_new_series(tiny):
    ws, a, b, patches = tiny
    tree = ws.root / "rebase" / "trees" / "toy"
    old = trial.try_series(ws, tree, a, _items(patches))
    assert [r.status for r in old.results] == ["clean", "3way", "clean", "clean"]  # 0002's context includes 0001's line
    new = trial.try_series(ws, tree, b, _items(patches))
    rd = trial.range_diff(a, old.commits, b, new.commits, ws=ws)
    lines = rd.splitlines()
    assert len([ln for ln in lines if " < " in ln.split("toy")[0]]) == 2  # 0001 and 0003 did not come along
    assert any("toy 0004-clean" in ln and " = " in ln for ln in lines)
    assert trial.range_diff(a, [], b, [], ws=ws) == ""


def _repo_of(src: Path, n: int) -> Path:
    """A git repository at `src` with one commit: f.txt of n lines."""
    src.mkdir()
    _run(src, "init", "-q", "-b", "main")
    (src / "f.txt").write_text(_lines(n))
    _run(src, "add", "-A")
    _run(src, "commit", "-q", "-m", "A")
    return src


def test_a_change_already_in_a_base_that_moved_on_is_upstream_not_conflict(tmp_path):
    """Issue 28: the base holds the patch's change, but upstream changed the lines around it since, and
    the patch's preimage is not in the cache (a base from another sdist or commit): neither the patch
    nor its reverse applies, and `git am -3` has nothing to merge with. It is "upstream", not "conflict"."""
    src = _repo_of(tmp_path / "src", 40)
    (src / "f.txt").write_text(_lines(40, l5="line 5 pr", l30="line 30 pr"))  # the PR: two hunks
    _run(src, "commit", "-q", "-am", "the PR")
    pr = tmp_path / "0001-pr.patch"
    pr.write_bytes(
        subprocess.run(
            ["git", "format-patch", *trial.FORMAT_PATCH_OPTS, "--stdout", "-1", "HEAD"], cwd=src, capture_output=True
        ).stdout
    )
    later = {"l4": "line 4 later", "l6": "line 6 later", "l29": "line 29 later", "l31": "line 31 later"}
    (src / "f.txt").write_text(_lines(40, l5="line 5 pr", l30="line 30 pr", **later))
    _run(src, "commit", "-q", "-am", "upstream moved on")
    c = _run(src, "rev-parse", "HEAD")
    ws = Workspace.at(tmp_path / "work")
    source.open_cache_repo(ws)
    _run(ws.repo, "fetch", "-q", "--depth", "1", str(src), c)  # only the new base: no preimage blob
    tree = ws.root / "rebase" / "trees" / "toy"
    [res] = trial.try_series(ws, tree, c, [(Patch(file="patches/0001-pr.patch"), pr)]).results
    assert res.status == "upstream", res.detail
    assert res.detail.startswith("already in the base: each of its 2 hunk(s) is there")
    # one hunk there, the other changed differently upstream: a conflict that names the hunk already there
    (src / "f.txt").write_text(_lines(40, l5="line 5 pr", l30="line 30 other", **later))
    _run(src, "commit", "-q", "-am", "upstream took another line 30")
    d = _run(src, "rev-parse", "HEAD")
    _run(ws.repo, "fetch", "-q", "--depth", "1", str(src), d)
    [res] = trial.try_series(ws, tree, d, [(Patch(file="patches/0001-pr.patch"), pr)]).results
    assert res.status == "conflict" and "already in the base: f.txt hunk #1" in res.detail


def test_a_change_the_3way_merge_finds_already_there_is_upstream_not_3way(tmp_path):
    """Found with recipes/pool1d-cuda.toml on 0.3.36 (which holds upstream's POOL_1D): a patch that adds a
    file, whose context upstream changed since, with its preimage in the cache (an older base): `git am -3`
    merges to no change and exits 0 ("No changes -- Patch already applied."). That is "upstream", not
    "3way" with the base's own commit recorded as the patch's."""
    src = _repo_of(tmp_path / "src", 40)
    a = _run(src, "rev-parse", "HEAD")
    (src / "f.txt").write_text(_lines(40, l5="line 5 pr", l30="line 30 pr"))
    (src / "new.txt").write_text("a file the PR adds\n")
    _run(src, "add", "-A")
    _run(src, "commit", "-q", "-m", "the PR")
    pr = tmp_path / "0001-pr.patch"
    pr.write_bytes(
        subprocess.run(
            ["git", "format-patch", *trial.FORMAT_PATCH_OPTS, "--stdout", "-1", "HEAD"], cwd=src, capture_output=True
        ).stdout
    )
    (src / "f.txt").write_text(
        _lines(40, l5="line 5 pr", l30="line 30 pr", l33="line 33 later")
    )  # in the hunk's context, not next to it
    _run(src, "commit", "-q", "-am", "upstream moved on")
    c = _run(src, "rev-parse", "HEAD")
    ws = Workspace.at(tmp_path / "work")
    source.open_cache_repo(ws)
    for commit in (a, c):  # the older base too: the preimage blobs are there for the 3-way merge
        _run(ws.repo, "fetch", "-q", "--depth", "1", str(src), commit)
    tree = ws.root / "rebase" / "trees" / "toy"
    [res] = trial.try_series(ws, tree, c, [(Patch(file="patches/0001-pr.patch"), pr)]).results
    assert res.status == "upstream" and res.commit == "", (res.status, res.detail, res.commit)
    assert res.detail == "the 3-way merge finds the change already there"
    [res] = trial.try_series(ws, tree, a, [(Patch(file="patches/0001-pr.patch"), pr)]).results
    assert res.status == "clean" and res.commit  # on the older base it applies as before


def test_each_candidate_says_which_route_it_takes(tmp_path):
    """Issue 28: newest-base tells which route a base takes: a git commit (any commit; offline only from a
    local clone) and which cached sdists vendor the same commit; an sdist and the commit it vendors."""
    src = _repo_of(tmp_path / "src", 3)
    a = _run(src, "rev-parse", "HEAD")
    ws = Workspace.at(tmp_path / "work")
    local = Base(source="git", upstream=f"o/r@{a}", git=GitBase(url=str(src), commit=a))
    info = source.fetch(local, ws, offline=True)
    assert bases.route_line(a, local, info, ws) == (
        f"route: git {src} (a local clone: works offline); any commit; "
        "no known llama-cpp-python sdist vendors it: git route only"
    )
    # the record patchkit writes of the seed's sdist base (the 0.3.36 import, verified upstream)
    v36 = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    record = {"key": "sdist-llama-cpp-python-0.3.36", "commit": v36, "route": "sdist", "upstream_verified": True}
    (ws.cache / "bases" / "sdist-llama-cpp-python-0.3.36.json").write_text(json.dumps(record))
    remote = Base(source="git", upstream=f"o/r@{v36}", git=GitBase(url="https://example.invalid/l.git", commit=v36))
    line = bases.route_line(v36, remote, source.BaseInfo(**{**info.to_dict(), "commit": v36}), ws)
    assert line == (
        "route: git https://example.invalid/l.git (needs the network unless cached); any commit; "
        "also vendored by sdist:0.3.36 (the sdist route: offline)"
    )
    sd = SdistBase(name="llama-cpp-python", version="0.3.36", sha256="0" * 64)
    sdist = Base(source="sdist", upstream=f"ggml-org/llama.cpp@{v36}", sdist=sd)
    sinfo = source.BaseInfo(
        key="k", ref="r", commit=v36, route="sdist", upstream=sdist.upstream, upstream_verified=True
    )
    assert bases.route_line("sdist:0.3.36", sdist, sinfo, ws) == (
        f"route: sdist 0.3.36: vendors ggml-org/llama.cpp@{v36}; offline once the sdist is cached"
    )


# ---------------------------------------------------------------------------------------------
# newest-base for measuring a PR (issue 34): a base that already contains the series is named, never chosen


def _pr_project(tmp_path: Path, n_patches: int) -> tuple[Path, list[str]]:
    """A git repo (local clone, so offline works) with base A, then one commit per PR patch as upstream
    merged them (each a candidate base that contains more of the series), and a recipe on A whose series
    is those patches. Returns the recipe file and the commits [A, A+0001, A+0001+0002, ...]."""
    src = _repo_of(tmp_path / "src", 40)
    commits = [_run(src, "rev-parse", "HEAD")]
    proj = tmp_path / "proj"
    (proj / "patches").mkdir(parents=True)
    (proj / "recipes").mkdir()
    changed: dict[str, str] = {}
    series = ""
    for i in range(1, n_patches + 1):
        changed[f"l{i * 10}"] = f"line {i * 10} pr"
        (src / "f.txt").write_text(_lines(40, **changed))
        _run(src, "commit", "-q", "-am", f"pr part {i}")
        commits.append(_run(src, "rev-parse", "HEAD"))
        name = f"{i:04d}-part-{i}.patch"
        argv = ["git", "format-patch", *trial.FORMAT_PATCH_OPTS, "--stdout", "-1", "HEAD"]
        (proj / "patches" / name).write_bytes(subprocess.run(argv, cwd=src, capture_output=True).stdout)
        series += f'\n[[series]]\nfile = "patches/{name}"\n'
    recipe = proj / "recipes" / "t.toml"
    recipe.write_text(
        f'[recipe]\nname = "t"\n\n[base]\nsource = "git"\nupstream = "o/r@{commits[0]}"\n\n'
        f'[base.git]\nurl = "{src}"\ncommit = "{commits[0]}"\n{series}'
    )
    return recipe, commits


def test_newest_base_recommends_the_newest_base_that_does_not_contain_the_series(tmp_path, capsys):
    """Was: a candidate whose patches are all "upstream" counted as applying, so newest-base recommended the
    base that already contains the PR (0.3.35 for a PR merged in it)."""
    from patchkit.maintain import newest
    from patchkit.recipe import load_recipe

    recipe_file, (a, a1, a12) = _pr_project(tmp_path, 2)
    recipe = load_recipe(str(recipe_file))
    ws = Workspace.at(tmp_path / "work")
    cands = [bases.parse_onto(c) for c in (a, a1, a12)]
    res = newest.newest_base(recipe, ws, cands, offline=True)
    assert [c.applies for c in res.candidates] == [True, True, True]  # upstream patches do not conflict
    assert [c.contains for c in res.candidates] == ["", "part", "series"]
    assert [c.upstream for c in res.candidates] == [[], ["0001"], ["0001", "0002"]]
    assert res.best is res.candidates[0]
    assert res.candidates[2].contains_line() == (
        f"{a12}: already contains the series (upstream: 0001, 0002); not a base to measure it on"
    )
    data = json.loads(res.path.read_text())
    assert data["newest"] == a and [c["contains"] for c in data["candidates"]] == [None, "part", "series"]
    # the command line says it, and with only bases that contain the PR there is no answer (exit 1)
    ran = patchkit_main(
        "newest-base", "-r", str(recipe_file), "--work", str(ws.root), "--offline", "--candidates", a1, a12
    )
    assert ran.returncode == 1, ran.stderr
    out = ran.stdout
    assert f"{a1}: already contains part of the series (upstream: 0001); not a base to measure it on" in out
    assert "newest base: none of the 2 candidates takes the whole series as a change" in out
