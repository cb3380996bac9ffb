"""Faults of the work folder, on a toy sdist (a few files, real tar.gz, real git, real processes):
a wrong or changed sdist hash once the base is cached (defect 1), a copied or moved work folder
(defect 5), a file given as the work folder (defect 10), a patch that stops applying (defect 12).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from patchkit import build, series, source
from patchkit.errors import ApplyError, FetchError, PatchkitError
from patchkit.recipe import load_recipe
from patchkit.workspace import MARKER, Workspace
from tests.conftest import Ran, git, patchkit_main

ROOT = Path(__file__).resolve().parents[2]
GIT_DATES = {  # fixed dates: the same edit gives the same patch file every time
    "GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000",
}
_git = functools.partial(git, env=GIT_DATES)
FILES = {
    "toy_sdist-1.0/pyproject.toml": b"[project]\nname = 'toy-sdist'\n",
    "toy_sdist-1.0/vendor/llama.cpp/CMakeLists.txt": b"project(toy)\n",
    "toy_sdist-1.0/vendor/llama.cpp/ggml/src/a.c": b"int a = 1;\n",
    "toy_sdist-1.0/vendor/llama.cpp/ggml/src/b.c": b"int b = 2;\n",
}
RECIPE = """
[recipe]
name = "toy"

[base]
source = "sdist"

[base.sdist]
name = "toy-sdist"
version = "1.0"
sha256 = "{sha}"

[[series]]
file = "patches/0001-a.patch"

[[series]]
file = "patches/0002-b.patch"
"""


def toy_sdist(path: Path) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in FILES.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_000_000_000
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_patch(ws: Workspace, base: source.BaseInfo, tmp: Path, rel: str, old: str, new: str, subject: str) -> str:
    """A real format-patch: the edit committed on a worktree of the base."""
    wt = tmp / f"wt-{hashlib.sha256(subject.encode()).hexdigest()[:8]}"
    _git(ws.repo, "worktree", "add", "--detach", str(wt), base.commit)
    f = wt / rel
    f.write_text(f.read_text().replace(old, new))
    _git(wt, "commit", "-q", "-am", subject)
    text = _git(wt, "format-patch", "--stdout", "-1", "HEAD")
    _git(ws.repo, "worktree", "remove", "--force", str(wt))
    return text + "\n"


class Toy:
    """A project (recipes/toy.toml + patches) and a work folder whose cache holds the toy sdist."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.proj = tmp / "proj"
        (self.proj / "recipes").mkdir(parents=True)
        (self.proj / "patches").mkdir()
        self.ws = Workspace.at(tmp / "work")
        archive = self.ws.sdist("toy_sdist-1.0.tar.gz")
        archive.parent.mkdir(parents=True)
        self.sha = toy_sdist(archive)
        self.write_recipe(self.sha)
        for name in ("0001-a.patch", "0002-b.patch"):
            (self.proj / "patches" / name).write_text("")
        self.base = source.fetch(self.recipe().base, self.ws, offline=True)

    def write_recipe(self, sha: str) -> None:
        (self.proj / "recipes" / "toy.toml").write_text(RECIPE.format(sha=sha))

    def recipe(self):
        return load_recipe(str(self.proj / "recipes" / "toy.toml"))

    def write_patches(self, *, broken_0002: bool = False) -> None:
        a = make_patch(self.ws, self.base, self.tmp, "ggml/src/a.c", "a = 1", "a = 10", "a: ten")
        b = make_patch(self.ws, self.base, self.tmp, "ggml/src/b.c", "b = 2", "b = 20", "b: twenty")
        if broken_0002:  # its context does not exist upstream, not even 3-way (no usable blob ids)
            b = b.replace("-int b = 2;", "-int b = 3;").replace("index ", "index 1111111..2222222 100644\nX-")
            b = "\n".join(ln for ln in b.splitlines() if not ln.startswith("X-")) + "\n"
        (self.proj / "patches" / "0001-a.patch").write_text(a)
        (self.proj / "patches" / "0002-b.patch").write_text(b)

    def apply(self, ws: Workspace | None = None):
        r = self.recipe()
        return series.apply_all(r, self.base, ws or self.ws, series.plan_variants(r))


def cli(*args: str, cwd: Path) -> Ran:
    return patchkit_main(*args, cwd=cwd)


@pytest.fixture
def toy(tmp_path):
    return Toy(tmp_path)


# -- defect 1: the sdist is verified on every use, cached base or not


def test_a_wrong_recipe_sha256_is_refused_once_the_base_is_cached(toy):
    wrong = "0" * 64
    toy.write_recipe(wrong)
    with pytest.raises(FetchError) as e:
        source.fetch(toy.recipe().base, toy.ws, offline=True)
    msg = str(e.value)
    assert "base.sdist.sha256" in msg and wrong in msg and toy.sha in msg and "\n" not in msg


def test_a_changed_cached_sdist_is_refused_once_the_base_is_cached(toy):
    archive = toy.ws.sdist("toy_sdist-1.0.tar.gz")
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(FetchError, match=rf"sha256 {hashlib.sha256(data).hexdigest()} does not match .* {toy.sha}"):
        source.fetch(toy.recipe().base, toy.ws, offline=True)


def test_a_cached_base_without_its_sdist_is_checked_against_its_record(toy):
    """What a GPU machine carries: the bare repo and bases/*.json, no sdist."""
    toy.ws.sdist("toy_sdist-1.0.tar.gz").unlink()
    assert source.fetch(toy.recipe().base, toy.ws, offline=True) == toy.base
    toy.write_recipe("1" * 64)
    with pytest.raises(
        FetchError, match=rf"imported from the sdist with sha256 {toy.sha}, not the recipe.s base.sdist.sha256 1{{64}}"
    ):
        source.fetch(toy.recipe().base, toy.ws, offline=True)


# -- defect 5: a copied or moved work folder never drives the original


def test_a_copied_work_folder_is_refused_and_the_original_is_untouched(toy):
    toy.write_patches()
    states, errors = toy.apply()
    assert not errors and len(states) == 3
    heads = {s.name: _git(toy.ws.variants("toy") / s.name, "rev-parse", "HEAD") for s in states}
    copy = toy.tmp / "copy"
    shutil.copytree(toy.ws.root, copy, symlinks=True)
    with pytest.raises(PatchkitError) as e:
        Workspace.at(copy)
    assert f"work folder {copy} was made at {toy.ws.root}" in str(e.value)
    # the command line: exit 2, one line, and the original's trees as they were
    (toy.proj / "patches" / "0001-a.patch").write_text(
        make_patch(toy.ws, toy.base, toy.tmp, "ggml/src/a.c", "a = 1", "a = 11", "a: eleven")
    )
    r = cli("apply", "-r", "toy", "--work", str(copy), "--offline", cwd=toy.proj)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "moved or copied" in r.stderr, r.stderr
    for name, head in heads.items():
        tree = toy.ws.variants("toy") / name
        assert _git(tree, "rev-parse", "HEAD") == head and "a = 11" not in (tree / "ggml/src/a.c").read_text()
    # a copy made before work folders had their record: found by its worktree links
    (copy / MARKER).unlink()
    with pytest.raises(PatchkitError, match=f"was made at {toy.ws.root}"):
        Workspace.at(copy)
    # what the message says to do works: without variants/, builds/ and the record it is a work folder again
    shutil.rmtree(copy / "variants")
    Workspace.at(copy)


def test_a_moved_work_folder_is_refused(toy):
    toy.write_patches()
    toy.apply()
    moved = toy.tmp / "moved"
    os.rename(toy.ws.root, moved)
    with pytest.raises(PatchkitError, match="moved or copied"):
        Workspace.at(moved)


def test_build_manifests_hold_paths_relative_to_the_work_folder(toy, tmp_path):
    _a_finished_build(toy)


def _a_finished_build(toy):
    """A manifest of a finished build with its binary and build folder, found by find_build."""
    toy.write_patches()
    states, _ = toy.apply()
    opts = build.BuildOptions(backend="cpu", archs=(), targets=("t",))
    tc = build.Toolchain(cmake_args=("-DGGML_CUDA=OFF",))
    out = build.bin_dir(toy.ws, toy.recipe(), opts, states[0].name)
    result = build.BuildResult(
        variant=states[0].name,
        key=build.build_key(states[0], opts, tc),
        head=states[0].head,
        bin_dir=str(out),
        seconds=1.0,
        reused=False,
        steps=1,
        log=str(toy.ws.root / "logs" / "toy" / "build-cpu-base.log"),
    )
    out.mkdir(parents=True)
    (out / "t").write_bytes(b"binary")
    bdir = build.build_root(toy.ws, toy.recipe(), opts) / "build"
    bdir.mkdir(parents=True)
    (bdir / "build.ninja").write_text("# ninja\n")
    manifest = build._manifest(toy.ws, result, tc, opts, out)
    assert manifest["result"]["bin_dir"] == "builds/toy/cpu/bin/base"
    assert manifest["result"]["log"] == "logs/toy/build-cpu-base.log"
    (out / "manifest.json").write_text(json.dumps(manifest))
    found = build.find_build(toy.ws, toy.recipe(), opts, states[0], tc)
    assert found is not None and found.bin_dir == str(out) and found.reused
    assert found.log == str(toy.ws.root / "logs/toy/build-cpu-base.log")
    return states[0], opts, tc, out, bdir


def test_a_build_whose_binary_or_build_folder_is_gone_is_not_reused(toy, tmp_path, capsys):
    state, opts, tc, out, bdir = _a_finished_build(toy)
    (out / "t").write_bytes(b"other")  # changed since it was built
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is None
    assert "is not the binary that was built" in capsys.readouterr().out
    (out / "t").unlink()
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is None
    assert "is missing; building it again" in capsys.readouterr().out
    (out / "t").write_bytes(b"binary")
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None
    (bdir / "build.ninja").unlink()
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is None
    assert "build folder" in capsys.readouterr().out


def test_a_reused_build_is_hashed_again_only_where_its_stat_cannot_prove_it_unwritten(toy, monkeypatch, capsys):
    """bin/<variant>/verified.json: a binary hashed once and unwritten since (same device, inode, size, mtime,
    ctime, the ctime older than the check by more than a timestamp tick) is not read again; a rewrite of the same
    size in the same second, a replaced file or a damaged record is hashed and caught."""
    from patchkit.build import binaries

    state, opts, tc, out, _ = _a_finished_build(toy)
    hashed = []
    real = binaries.file_facts
    monkeypatch.setattr(binaries, "file_facts", lambda f: hashed.append(f.name) or real(f))
    seen = json.loads((out / binaries.VERIFIED).read_text())
    assert seen["t"]["sha256"] == hashlib.sha256(b"binary").hexdigest()
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None
    assert hashed == ["t"]  # written a moment ago: a stat this close to its ctime proves nothing (racy)
    monkeypatch.setattr(binaries, "RACY_NS", 0)  # as if the check came a timestamp tick after the build
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None
    assert hashed == ["t"]  # proven unwritten by its stat: not read
    monkeypatch.setattr(binaries, "RACY_NS", 2_000_000_000)
    (out / "t").write_bytes(b"BINARY")  # same size, other bytes, maybe in the same timestamp tick
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is None
    assert "is not the binary that was built" in capsys.readouterr().out and hashed == ["t", "t"]
    monkeypatch.setattr(binaries, "RACY_NS", 0)
    (out / "t").write_bytes(b"binary")
    os.utime(out / "t", ns=(0, 0))  # its old mtime back: the ctime still moved, so it is hashed, then trusted
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None and hashed == ["t", "t", "t"]
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None and len(hashed) == 3
    (out / binaries.VERIFIED).write_text("{")  # damaged: every file hashed, the record written again
    assert build.find_build(toy.ws, toy.recipe(), opts, state, tc) is not None and len(hashed) == 4
    assert json.loads((out / binaries.VERIFIED).read_text())["t"]["sha256"] == seen["t"]["sha256"]


def test_apply_writes_only_the_files_its_patches_touch_and_makes_the_same_commits(toy, monkeypatch):
    """The scratch tree `git am` runs in holds the files the patches name, not the whole base (a full checkout
    and its removal: 1.45 s of the warm loop on 2 cores); the commits are the full tree's."""
    toy.write_patches()
    r = toy.recipe()
    seen = []
    real_am = series.am

    def am(wt, *a):
        seen.append(sorted(str(f.relative_to(wt.working_dir)) for f in Path(wt.working_dir).rglob("*.c")))
        return real_am(wt, *a)

    monkeypatch.setattr(series, "am", am)
    states, errors = toy.apply()
    assert not errors and seen == [["ggml/src/a.c"], ["ggml/src/a.c", "ggml/src/b.c"]]
    sparse = {s.name: s.head for s in states}
    monkeypatch.setattr(series.Chain, "_touched", lambda self, patches: ())  # git cannot list them: the whole tree
    seen.clear()
    chain = series.Chain(source.open_cache_repo(toy.ws), toy.ws, r)
    try:
        made = [series.series_commits(chain.repo, toy.ws, r, toy.base, v, chain) for v in series.plan_variants(r)]
    finally:
        chain.close()
    assert [head for head, _ in made] == list(sparse.values()) and seen[0] == ["ggml/src/a.c", "ggml/src/b.c"]


# -- defect 10: a file as the work folder


def test_a_file_given_as_the_work_folder_is_one_line(toy):
    f = toy.tmp / "a-file"
    f.write_text("not a folder\n")
    with pytest.raises(PatchkitError, match="is a file, not a folder"):
        Workspace.at(f)
    r = cli("fetch", "-r", "toy", "--work", str(f), "--offline", cwd=toy.proj)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "is a file" in r.stderr, r.stderr


# -- defect 12: a patch that stops applying touches no variant's tree


def test_a_failing_variant_keeps_its_last_good_tree_and_the_others(toy):
    toy.write_patches()
    states, errors = toy.apply()
    assert not errors
    before = {s.name: s.head for s in states}
    toy.write_patches(broken_0002=True)
    states, errors = toy.apply()
    assert [s.name for s in states] == ["base", "+0001"] and len(errors) == 1
    assert isinstance(errors[0], ApplyError) and "patches/0002-b.patch" in str(errors[0])
    trees = toy.ws.variants("toy")
    assert _git(trees / "+0001+0002", "rev-parse", "HEAD") == before["+0001+0002"]
    assert "b = 20" in (trees / "+0001+0002" / "ggml/src/b.c").read_text()  # the last good tree, not the base
    assert _git(trees / "+0001", "rev-parse", "HEAD") == before["+0001"]
    assert _git(trees / "base", "rev-parse", "HEAD") == toy.base.commit
    assert not list((toy.ws.cache / "tmp").glob("apply-*"))  # no scratch tree left behind
    toy.write_patches()  # fixed again: the variant is up to date with no work
    states, errors = toy.apply()
    assert not errors and states[2].head == before["+0001+0002"]


def test_a_series_of_60_patches_applies_with_bounded_folder_names(tmp_path):
    """issue 34: from ~51 patches the variant's name (+0001+0002...) as folder and lock name passed 255 bytes
    (a traceback). 60 real patches (real git): the longest variant applies in a folder of a bounded name
    holding its key; its display name stays the whole name."""
    toy = Toy(tmp_path)
    wt = tmp_path / "wt"
    _git(toy.ws.repo, "worktree", "add", "--detach", str(wt), toy.base.commit)
    for i in range(1, 61):
        (wt / f"ggml/src/n{i:04d}.txt").write_text(f"{i}\n")
        _git(wt, "add", "-A")
        _git(wt, "commit", "-q", "-m", f"add n{i:04d}")
    _git(wt, "format-patch", "-q", "-60", "-o", str(toy.proj / "patches"), "--zero-commit", "HEAD")
    files = sorted(p.name for p in (toy.proj / "patches").glob("00*-add-*.patch"))
    assert len(files) == 60
    text = (toy.proj / "recipes" / "toy.toml").read_text().split("[[series]]")[0]
    text += "".join(f'[[series]]\nfile = "patches/{f}"\n' for f in files)
    (toy.proj / "recipes" / "toy.toml").write_text(text)
    recipe = toy.recipe()
    last = series.plan_variants(recipe)[-1]
    assert len(last.name) > 255 and len(last.folder) <= 80 and last.folder.startswith("+0001_+0060_60p_")
    state, changed = series.apply_variant(recipe, toy.base, toy.ws, last)
    assert changed and state.name == last.name and len(state.patches) == 60
    tree = series.tree_path(toy.ws, recipe, last)
    assert tree.name == last.folder and (tree / "ggml/src/n0060.txt").read_text() == "60\n"
    assert series.apply_variant(recipe, toy.base, toy.ws, last) == (state, False)  # found again by its folder
    opts = build.BuildOptions(backend="cpu", archs=())
    assert build.bin_dir(toy.ws, recipe, opts, last.name).name == last.folder
    # another series of the same first and last patch and count is another folder (the hash of the name)
    other = series.Variant(name=last.name.replace("+0030", "+0031x"), patches=last.patches)
    assert other.folder != last.folder and other.folder.startswith("+0001_+0060_60p_")


def test_a_patch_saved_with_crlf_applies_as_plain_git_am_applies_it(tmp_path):
    """issue 34: a CRLF patch that plain `git am` applies was refused as a hunk conflict (--keep-cr)."""
    toy = Toy(tmp_path)
    toy.write_patches()
    p = toy.proj / "patches" / "0001-a.patch"
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    wt = tmp_path / "plain"
    _git(toy.ws.repo, "worktree", "add", "--detach", str(wt), toy.base.commit)
    _git(wt, "am", str(p))  # plain git am applies it
    assert (wt / "ggml/src/a.c").read_bytes() == b"int a = 10;\n"
    recipe = toy.recipe()
    _, errors = series.apply_all(recipe, toy.base, toy.ws, series.plan_variants(recipe))
    assert not errors, errors
    assert (toy.ws.variants("toy") / "+0001" / "ggml/src/a.c").read_bytes() == b"int a = 10;\n"
    # where it cannot apply either way, the error says its lines end in CRLF
    bad = toy.proj / "patches" / "0002-b.patch"
    bad.write_bytes(bad.read_bytes().replace(b"-int b = 2;", b"-int b = 3;").replace(b"\n", b"\r\n"))
    with pytest.raises(ApplyError, match=r"0002-b\.patch does not apply: .*its lines end in CRLF"):
        series.apply_variant(recipe, toy.base, toy.ws, series.plan_variants(recipe)[-1])


def test_a_patch_writing_through_a_link_an_earlier_patch_added_is_one_clear_line(tmp_path):
    """issue 34: "does not apply: file There" for a patch that writes through a symbolic link an earlier patch
    added (plain `git am` refuses it too: "affected file ... is beyond a symbolic link")."""
    toy = Toy(tmp_path)
    wt = tmp_path / "wt"
    _git(toy.ws.repo, "worktree", "add", "--detach", str(wt), toy.base.commit)
    (wt / "ggml/lnk").symlink_to("src")
    _git(wt, "add", "-A")
    _git(wt, "commit", "-q", "-m", "link")
    (wt / "ggml/src/new.c").write_text("int n;\n")
    _git(wt, "add", "-A")
    _git(wt, "commit", "-q", "-m", "new file")
    out = tmp_path / "out"
    _git(wt, "format-patch", "-q", "-2", "-o", str(out), "HEAD")
    link, new = sorted(out.glob("*.patch"))
    (toy.proj / "patches" / "0001-a.patch").write_bytes(link.read_bytes())
    (toy.proj / "patches" / "0002-b.patch").write_text(new.read_text().replace("ggml/src/new.c", "ggml/lnk/new.c"))
    recipe = toy.recipe()
    _, errors = series.apply_all(recipe, toy.base, toy.ws, series.plan_variants(recipe))
    assert [str(e) for e in errors] == [
        "variant +0001+0002: patch patches/0002-b.patch does not apply: file ggml/lnk/new.c: a folder on its path "
        "is a symbolic link (made by an earlier patch or the base), and git writes no file through a link; have "
        "the patch name the path the link points to"
    ]
    assert (toy.ws.variants("toy") / "+0001" / "ggml/lnk").is_symlink()  # the variant before it is there


def test_a_command_in_a_sub_folder_uses_the_projects_work_folder(tmp_path):
    """issue 34: `patchkit fetch` run in a sub-folder of the project made a second work folder there and
    downloaded the sdist again. The default work folder is found the way git finds its repository."""
    toy = Toy(tmp_path)
    ws = Workspace.at(toy.proj / ".patchkit")
    ws.sdist("toy_sdist-1.0.tar.gz").parent.mkdir(parents=True)
    shutil.copy2(toy.ws.sdist("toy_sdist-1.0.tar.gz"), ws.sdist("toy_sdist-1.0.tar.gz"))
    sub = toy.proj / "patches"
    env = {k: v for k, v in os.environ.items() if k != "PATCHKIT_WORK"} | {"PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "patchkit", "fetch", "-r", "toy", "--offline"]
    r = subprocess.run(argv, cwd=sub, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr  # offline: the project's cached sdist was found
    assert (toy.proj / ".patchkit" / MARKER).is_file() and not (sub / ".patchkit").exists()
    deeper = sub / "a" / "b"
    deeper.mkdir(parents=True)
    r = subprocess.run(argv, cwd=deeper, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and not (deeper / ".patchkit").exists(), r.stderr
    # --work and $PATCHKIT_WORK are taken as given, relative to where the command runs
    r = subprocess.run([*argv, "--work", "w2"], cwd=sub, capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "not in the cache and --offline was given" in r.stderr and str(sub / "w2") in r.stderr
