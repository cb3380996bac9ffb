"""patchkit.parsers.patch on the project's own patch series (patches/) and on patches and `git am -3`
output that real git makes here."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from patchkit import vcs
from patchkit.parsers import CONFLICT, Hunk, conflict_files, parse_hunks, split_hunks
from tests.conftest import git

from .conftest import ROOT

SERIES = sorted((ROOT / "patches").rglob("*.patch"))
BASE_A = "".join(f"a line {i}\n" for i in range(1, 41))
BASE_B = "".join(f"b line {i}\n" for i in range(1, 11))


# the repository made by plain git, without the user's git config (as vcs.git runs it); what the parser is fed
# (`git apply`, `git am -3`) comes through vcs.git, as patchkit.maintain.trial runs it
_git = functools.partial(git, env=vcs.NEUTRAL_ENV)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text(BASE_A)
    (repo / "b.txt").write_text(BASE_B)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


def _patch(repo: Path) -> str:
    """format-patch of a commit with two hunks in a.txt (lines 3 and 35) and one in b.txt."""
    a = BASE_A.replace("a line 3\n", "a line three\n").replace("a line 35\n", "a line 35\nadded after 35\n")
    (repo / "a.txt").write_text(a)
    (repo / "b.txt").write_text(BASE_B.replace("b line 10\n", "b line ten"))  # no newline at the end
    _git(repo, "commit", "-q", "-am", "change")
    text = _git(repo, "format-patch", "-1", "--stdout", strip=False)
    _git(repo, "reset", "-q", "--hard", "HEAD~1")
    return text


@pytest.mark.parametrize("patch", SERIES, ids=lambda p: p.name)
def test_the_project_series(patch):
    text = patch.read_text()
    hunks = parse_hunks(text)
    assert len(hunks) == sum(ln.startswith("@@ ") for ln in text.splitlines()) >= 1
    # a file the patch adds (recipes/pool1d-cuda.toml's pool1d.cu) has one hunk from nothing
    added = set(re.findall(r"^diff --git a/(\S+) b/\1\nnew file mode ", text, flags=re.M))
    for h in hunks:
        assert isinstance(h, Hunk) and ((h.old_start > 0 and h.old_len > 0) or h.old_start == h.old_len == 0), h
        assert (h.old_len == 0) == (h.file in added), h
    for f in {h.file for h in hunks}:  # numbered 1, 2, ... within each file
        assert [h.index for h in hunks if h.file == f] == list(range(1, 1 + sum(h.file == f for h in hunks)))
    parts = split_hunks(text)
    assert [h for h, _ in parts] == hunks
    for h, body in parts:
        assert body.startswith(f"diff --git a/{h.file} b/{h.file}\n") and f"\n{h.header}" in body


def test_git_made_patch_hunks_apply_one_by_one(tmp_path):
    repo = _repo(tmp_path)
    text = _patch(repo)
    hunks = parse_hunks(text)
    assert [(h.file, h.index, h.old_start) for h in hunks] == [("a.txt", 1, 1), ("a.txt", 2, 33), ("b.txt", 1, 7)]
    assert hunks[0].header.startswith("@@ -1,6 +1,6 @@") and hunks[2].old_len == 4
    parts = split_hunks(text)
    assert [h for h, _ in parts] == hunks
    assert parts[2][1].endswith("\\ No newline at end of file\n")
    for _h, body in parts:  # each one applies on its own to the base ...
        assert vcs.git(repo, "apply", "--check", "-", input=body.encode()).ok
    for _h, body in parts:  # ... and all of them give what the whole patch gives
        assert vcs.git(repo, "apply", "-", input=body.encode()).ok
    assert (repo / "a.txt").read_text().count("added after 35") == 1
    assert (repo / "b.txt").read_text().endswith("b line ten")


def test_conflicts_named_by_git_am(tmp_path):
    repo = _repo(tmp_path)
    text = _patch(repo)
    (repo / "a.txt").write_text(BASE_A.replace("a line 3\n", "a line THREE upstream\n"))
    _git(repo, "rm", "-q", "b.txt")
    _git(repo, "commit", "-q", "-am", "upstream")
    (tmp_path / "x.patch").write_text(text)
    r = vcs.git(repo, "am", "-3", str(tmp_path / "x.patch"))
    assert not r.ok
    out = r.output
    assert "CONFLICT (content): Merge conflict in a.txt" in out and "CONFLICT (modify/delete): b.txt" in out
    assert conflict_files(out) == ["b.txt", "a.txt"]  # in git's order
    assert conflict_files(out + out) == ["b.txt", "a.txt"]
    m = CONFLICT.search(out)
    assert m is not None and m.group(1) == "b.txt"
    # as GitPython's GitCommandError formats stdout ("  stdout: '...'"): still found
    assert conflict_files(f"\n  stdout: '{out.strip()}'") == ["b.txt", "a.txt"]
    assert conflict_files("error: patch failed: a.txt:1\n") == []
