"""Fetch and apply on the real llama-cpp-python 0.3.36 sdist with real git."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import git
import pytest

from patchkit import source
from patchkit.errors import FetchError
from patchkit.recipe import parse_recipe

from .conftest import copy_base, copy_cache

UPSTREAM = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"

TOY_BASE = """
[recipe]
name = "toy"

[base]
source = "sdist"
upstream = "ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f"
prune = ["models", "docs", "media", "tools/ui", ".github"]

[base.sdist]
name = "llama-cpp-python"
version = "0.3.36"
sha256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
"""


def test_fetch_is_the_upstream_commit_and_cached(base, work):
    assert base.commit == UPSTREAM
    assert base.upstream_verified
    repo = source.open_cache_repo(work)
    assert repo.run("rev-parse", f"{base.ref}^{{tree}}") == repo.run("rev-parse", f"{UPSTREAM}^{{tree}}")
    # a second fetch uses the cache: it works with the network forbidden
    again = source.fetch(_base_recipe(), work, offline=True)
    assert again == base


def test_tampered_archive_is_rejected(work, tmp_path):
    ws = copy_cache(work, tmp_path / "w")
    f = next((ws.cache / "sdist").glob("*.tar.gz"))
    data = bytearray(f.read_bytes())
    f.unlink()  # break the hard link before changing a byte
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(FetchError, match=r"sha256 .* does not match"):
        source.fetch(_base_recipe(), ws, offline=True)
    assert not (ws.cache / "bases").exists()


def test_archive_with_path_traversal_is_refused(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name in ("pkg-1.0/vendor/llama.cpp/ok.txt", "pkg-1.0/vendor/llama.cpp/../../../evil.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(FetchError, match="unsafe path"):
        source.extract_subdirs(bad, tmp_path / "out", ("vendor/llama.cpp",))
    assert not (tmp_path / "evil.txt").exists()


def _base_recipe():
    return parse_recipe(TOY_BASE, Path("toy.toml")).base


def _make_patch(work, base, tmp: Path, edit, subject: str) -> str:
    """A real format-patch of an edit made on a worktree of the base."""
    repo = source.open_cache_repo(work)
    wt_path = tmp / f"wt-{abs(hash(subject))}"
    repo.run("worktree", "add", "--detach", str(wt_path), base.commit)
    wt = git.Repo(wt_path)
    edit(wt_path)
    wt.git.add("-A")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    wt.git.execute(["git", "commit", "-q", "-m", subject], env=env)
    text = wt.git.format_patch("--stdout", "-1", "HEAD")
    repo.run("worktree", "remove", "--force", str(wt_path))
    return text + "\n"


def _replace(rel: str, old: str, new: str):
    def edit(root: Path) -> None:
        p = root / rel
        s = p.read_text()
        assert old in s, f"{old!r} not in {rel}"
        p.write_text(s.replace(old, new, 1))

    return edit


def test_apply_reports_the_failing_hunk_and_keeps_other_variants(work, base, toy_project, cli, tmp_path):
    good = _make_patch(
        work,
        base,
        tmp_path,
        _replace("ggml/src/ggml-cpu/ops.cpp", "#include", "// patchkit toy patch\n#include"),
        "ggml-cpu: toy comment",
    )
    broken_src = _make_patch(
        work,
        base,
        tmp_path,
        _replace("ggml/src/ggml.c", "#include", "// second toy patch\n#include"),
        "ggml: second toy",
    )
    # damage the context of the second patch's only hunk so it cannot apply, not even 3-way
    lines = broken_src.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("@@"))
    ctx_i = next(i for i in range(at + 1, len(lines)) if lines[i].startswith(" ") and len(lines[i]) > 3)
    lines[ctx_i] = " this context line does not exist upstream\n"
    broken = "".join(lines).replace("index ", "index 0000000..0000000 100644\nX-", 0)
    # the blob ids in the index line let -3 find the original; point them at nothing
    broken = (
        "\n".join(ln if not ln.startswith("index ") else "index 1111111..2222222 100644" for ln in broken.splitlines())
        + "\n"
    )
    recipe = (
        TOY_BASE
        + """
[[series]]
file = "patches/0001-good.patch"

[[series]]
file = "patches/0002-broken.patch"
"""
    )
    proj = toy_project(recipe, {"patches/0001-good.patch": good, "patches/0002-broken.patch": broken})
    ws = copy_base(work, base, tmp_path / "w")
    r = cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj, check=False)
    assert r.returncode == 2, r.stderr
    err_line = r.stderr.strip().splitlines()[-1]
    assert err_line.startswith("patchkit: error: ")
    assert "patches/0002-broken.patch" in err_line
    assert "ggml/src/ggml.c" in err_line and "hunk #1" in err_line
    # the other variants are there and right
    v = ws.variants("toy")
    assert git.Repo(v / "base").git.rev_parse("HEAD") == base.commit
    good_head = git.Repo(v / "+0001")
    assert good_head.git.log("-1", "--format=%s") == "ggml-cpu: toy comment"
    assert "patchkit toy patch" in (v / "+0001" / "ggml/src/ggml-cpu/ops.cpp").read_text()
    # pruned paths are not checked out
    assert not (v / "base" / "models").exists() and (v / "base" / "ggml").is_dir()


def test_apply_refuses_a_dirty_variant_unless_forced(work, base, toy_project, cli, tmp_path):
    good = _make_patch(
        work, base, tmp_path, _replace("ggml/src/ggml-cpu/ops.cpp", "#include", "// toy\n#include"), "toy"
    )
    proj = toy_project(TOY_BASE + '\n[[series]]\nfile = "patches/0001-toy.patch"\n', {"patches/0001-toy.patch": good})
    ws = copy_base(work, base, tmp_path / "w")
    cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj)
    again = cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj)
    assert "up to date" in again.stdout
    edited = ws.variants("toy") / "+0001" / "ggml/src/ggml.c"
    edited.write_text(edited.read_text() + "\n// my work in progress\n")
    r = cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj, check=False)
    assert r.returncode == 2
    assert "uncommitted edits" in r.stderr and "ggml/src/ggml.c" in r.stderr
    assert "my work in progress" in edited.read_text()  # nothing the user had is lost
    cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", "--force", cwd=proj)
    assert "my work in progress" not in edited.read_text()


def _add_file(rel: str, text: str):
    def edit(root: Path) -> None:
        (root / rel).write_text(text)

    return edit


def test_apply_refuses_to_overwrite_a_file_the_user_made_in_a_variant_tree(work, base, toy_project, cli, tmp_path):
    """issue 34: an untracked file the edited series now adds was overwritten without a word (reset --hard)."""
    first = _make_patch(work, base, tmp_path, _add_file("ggml/src/toy-a.txt", "a\n"), "toy a")
    second = _make_patch(
        work,
        base,
        tmp_path,
        lambda root: (_add_file("ggml/src/toy-a.txt", "a\n")(root), _add_file("ggml/src/mine.c", "// patch\n")(root)),
        "toy a and mine",
    )
    proj = toy_project(TOY_BASE + '\n[[series]]\nfile = "patches/0001-toy.patch"\n', {"patches/0001-toy.patch": first})
    ws = copy_base(work, base, tmp_path / "w")
    args = ("apply", "-r", "toy", "--work", str(ws.root), "--offline")
    cli(*args, cwd=proj)
    tree = ws.variants("toy") / "+0001"
    mine, scratch = tree / "ggml/src/mine.c", tree / "scratch-notes.txt"
    mine.write_text("// my own work\n")
    scratch.write_text("notes\n")
    assert "up to date" in cli(*args, cwd=proj).stdout  # files of the user's: no harm while nothing changes
    (proj / "patches/0001-toy.patch").write_text(second)  # the series now adds ggml/src/mine.c
    r = cli(*args, cwd=proj, check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("patchkit: error: variant +0001: ") and "ggml/src/mine.c" in line and "--force" in line
    assert mine.read_text() == "// my own work\n" and scratch.is_file()  # nothing the user had is touched
    forced = cli(*args, "--force", cwd=proj)
    assert "discarded 2 untracked file(s)" in forced.stdout
    assert mine.read_text() == "// patch\n" and not scratch.exists()


def test_a_base_record_is_keyed_by_what_made_the_base(base, work, tmp_path):
    """issue 34: the record was keyed by sdist name and version only: after a recipe naming another upstream
    commit for the same sdist, the default recipe got that recipe's import commit ("not verified")."""
    ws = copy_cache(work, tmp_path / "w")
    other_commit = "1" * 40
    other = parse_recipe(TOY_BASE.replace(UPSTREAM, other_commit), Path("toy.toml")).base
    theirs = source.fetch(other, ws, offline=True)
    assert theirs.upstream.endswith(other_commit) and not theirs.upstream_verified and theirs.commit != UPSTREAM
    ours = source.fetch(_base_recipe(), ws, offline=True)
    assert ours.commit == UPSTREAM and ours.upstream_verified and ours.upstream.endswith(UPSTREAM)
    assert ours.key != theirs.key and ours.key.startswith("sdist-llama-cpp-python-0.3.36-")
    assert source.fetch(other, ws, offline=True) == theirs  # each from its own record, no import again
    assert source.sdist_version_of(ours.key) == "0.3.36"
