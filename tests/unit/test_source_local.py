"""The git route from a repository on this machine (issue 28), with real git: --offline means no network,
not no local git; a base is "verified upstream" only where it was compared with the named upstream commit."""

from __future__ import annotations

import functools
import json

import pytest

from patchkit import source
from patchkit.errors import FetchError
from patchkit.recipe import Base, GitBase
from patchkit.workspace import Workspace
from tests.conftest import git

_git = functools.partial(git, hermetic=True)  # no variable of this process, no git config of the user's


@pytest.fixture
def local(tmp_path):
    """A local repository: `up` (upstream's commit), `same` (a local commit of the same tree) and `local`
    (a local commit with an edit on top), and a commit never in it."""
    repo = tmp_path / "llama.cpp"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "ggml").mkdir()
    (repo / "ggml" / "f.c").write_text("int f(void) { return 1; }\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "upstream")
    up = _git(repo, "rev-parse", "HEAD")
    same = _git(repo, "commit-tree", f"{up}^{{tree}}", "-m", "a local commit of the same tree")
    (repo / "ggml" / "f.c").write_text("int f(void) { return 2; }\n")
    _git(repo, "commit", "-qam", "local edit")
    _git(repo, "branch", "same", same)
    return {"repo": repo, "up": up, "same": same, "local": _git(repo, "rev-parse", "HEAD"), "absent": "ab" * 20}


def _base(url: str, commit: str, upstream_sha: str = "") -> Base:
    upstream = f"ggml-org/llama.cpp@{upstream_sha}" if upstream_sha else ""
    return Base(source="git", upstream=upstream, git=GitBase(url=url, commit=commit))


@pytest.mark.parametrize("how", ["path", "file-url"])
def test_offline_fetches_from_a_local_repository(local, tmp_path, how):
    url = str(local["repo"]) if how == "path" else local["repo"].as_uri()
    ws = Workspace.at(tmp_path / "w")
    info = source.fetch(_base(url, local["local"], local["absent"]), ws, offline=True)
    assert info.commit == local["local"] and info.route == "git"
    assert source.show(ws, info.commit, "ggml/f.c") == "int f(void) { return 2; }\n"
    assert info.upstream_verified is False
    assert info.provenance == (
        f"a local commit {local['local'][:12]} of {url}, not compared with upstream "
        f"ggml-org/llama.cpp@{local['absent']} (not in that repository)"
    )


def test_offline_still_refuses_a_network_url_not_in_the_cache(tmp_path):
    with pytest.raises(FetchError, match=r"--offline was given \(https://example.invalid/l.git is not a local path"):
        source.fetch(_base("https://example.invalid/l.git", "cd" * 20), Workspace.at(tmp_path / "w"), offline=True)


def test_verified_only_where_compared_with_the_named_upstream_commit(local, tmp_path):
    url, ws = str(local["repo"]), Workspace.at(tmp_path / "w")
    own = source.fetch(_base(url, local["up"], local["up"]), ws, offline=True)  # upstream's own commit
    assert own.upstream_verified is True and own.provenance == ""
    tree = source.fetch(_base(url, local["same"], local["up"]), ws, offline=True)  # another commit, same tree
    assert tree.upstream_verified is True and "not upstream's commit, has upstream" in tree.provenance
    edit = source.fetch(_base(url, local["local"], local["up"]), ws, offline=True)  # compared: another tree
    assert edit.upstream_verified is False and "whose tree differs from upstream" in edit.provenance
    none = source.fetch(_base(url, local["local"]), Workspace.at(tmp_path / "w2"), offline=True)  # nothing named
    assert none.upstream_verified is False and "no upstream commit named" in none.provenance


def test_a_cached_record_that_says_verified_without_a_comparison_is_corrected(local, tmp_path):
    url, ws = str(local["repo"]), Workspace.at(tmp_path / "w")
    base = _base(url, local["local"], local["absent"])
    info = source.fetch(base, ws, offline=True)
    record = ws.base_meta(info.key)
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "provenance"}
    record.write_text(json.dumps({**old, "upstream_verified": True}))  # what older code wrote
    again = source.fetch(base, ws, offline=True)
    assert again.upstream_verified is False and again.provenance == info.provenance
    assert json.loads(record.read_text())["upstream_verified"] is False
