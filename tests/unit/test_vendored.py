"""Route choice by upstream commit (issue 28): patchkit's table of llama-cpp-python sdists and the
llama.cpp commit each vendors (patchkit.vendored), a recipe that names its base by upstream commit
alone, and newest-base's route for a commit. No network: the table is the recorded one, and a base
record in the cache stands in for a downloaded sdist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchkit import vendored
from patchkit.errors import RecipeError
from patchkit.maintain import bases
from patchkit.recipe import load_recipe, parse_recipe
from patchkit.workspace import Workspace
from tests.conftest import patchkit_main

ROOT = Path(__file__).resolve().parents[2]
V35 = "4df29be4f4c3673f428170fda944a5b19f743bb8"
V36 = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
OTHER = "1234567890abcdef1234567890abcdef12345678"


def test_the_table_is_well_formed_and_agrees_with_the_shipped_recipes():
    versions = [v.version for v in vendored.SDISTS]
    assert len(set(versions)) == len(versions) and len(versions) >= 2
    for v in vendored.SDISTS:
        assert re.fullmatch(r"[0-9a-f]{64}", v.sha256) and re.fullmatch(r"[0-9a-f]{40}", v.commit), v
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", v.date), v
    dates = [v.date for v in vendored.SDISTS]
    assert dates == sorted(dates)  # oldest to newest, as newest-base wants its candidates
    for name in ("default", "pool1d-cuda"):  # each shipped sdist recipe names a row of the table exactly
        base = load_recipe(str(ROOT / "recipes" / f"{name}.toml")).base
        assert base.sdist is not None
        row = vendored.by_version(base.sdist.version)
        assert row is not None and row.sha256 == base.sdist.sha256, name
        assert base.upstream == f"ggml-org/llama.cpp@{row.commit}", name


def test_lookup_by_commit_and_version():
    [row] = vendored.by_commit(V36)
    assert row.version == "0.3.36" and row.candidate == "sdist:0.3.36"
    assert vendored.by_commit(V35[:7].upper())[0].version == "0.3.35"  # a prefix of 7 or more
    assert vendored.by_commit(V35[:6]) == [] and vendored.by_commit("master") == []
    assert vendored.by_commit(OTHER) == []
    assert vendored.by_version("0.3.35").commit == V35 and vendored.by_version("0.1.0") is None
    table = (vendored.Vendored(version="9.9", sha256="0" * 64, commit=OTHER, date="2030-01-01"),)
    assert vendored.by_commit(OTHER, table)[0].version == "9.9"  # the functions read the table they are given


def test_route_advice_says_sdist_where_one_vendors_the_commit_and_git_otherwise():
    assert vendored.route_advice(V35).startswith("4df29be4f4c3 is vendored by sdist:0.3.35: the sdist route")
    assert f'upstream = "ggml-org/llama.cpp@{V35}"' in vendored.route_advice(V35)
    other = vendored.route_advice(OTHER)
    assert other.startswith("no llama-cpp-python sdist in patchkit's table (0.3.16, ")
    assert "take the git route ([base.git] url" in other


def test_a_recipe_may_name_its_base_by_upstream_commit_alone(tmp_path):
    f = tmp_path / "r.toml"
    base = parse_recipe(f'[base]\nupstream = "ggml-org/llama.cpp@{V35[:12]}"\n', f).base
    assert base.route == "sdist" and base.git is None
    assert base.upstream == f"ggml-org/llama.cpp@{V35}"  # the full commit
    assert base.sdist is not None and (base.sdist.version, base.sdist.subdir) == ("0.3.35", "vendor/llama.cpp")
    assert base.sdist.sha256 == vendored.by_version("0.3.35").sha256
    # [base.git] given: the git route as before; the table is not consulted
    git = parse_recipe(f'[base]\nupstream = "ggml-org/llama.cpp@{V35}"\n[base.git]\nurl = "/x"\n', f).base
    assert git.route == "git" and git.sdist is None and git.git.commit == V35


def test_a_commit_no_sdist_vendors_says_to_add_base_git(tmp_path):
    f = tmp_path / "r.toml"
    with pytest.raises(
        RecipeError, match=r"r\.toml: base\.upstream: .*no llama-cpp-python sdist .* vendors 1234567890ab"
    ):
        parse_recipe(f'[base]\nupstream = "ggml-org/llama.cpp@{OTHER}"\n', f)
    with pytest.raises(RecipeError, match=r"holds ggml-org/llama.cpp commits only; take the git route \(\[base\.git\]"):
        parse_recipe(f'[base]\nupstream = "someone/fork@{V35}"\n', f)  # the table is upstream's commits only
    with pytest.raises(RecipeError, match=r"no \[base\.git\] or \[base\.sdist\] table"):
        parse_recipe("[base]\nprune = []\n", f)


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path):
    (tmp_path / "recipes").mkdir()
    f = tmp_path / "recipes" / "r.toml"
    f.write_text(f'[base]\nupstream = "ggml-org/llama.cpp@{OTHER}"\n')
    r = patchkit_main("fetch", "-r", str(f), "--work", str(tmp_path / "w"), "--offline", cwd=ROOT)
    assert r.returncode == 2, r
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("patchkit: error: ") and "take the git route" in line


def _recipe_without_git(tmp_path: Path):
    f = tmp_path / "r.toml"
    return parse_recipe(f'[recipe]\nname = "r"\n[base]\nupstream = "ggml-org/llama.cpp@{V36}"\n', f, tmp_path)


def test_newest_base_takes_the_sdist_route_for_a_commit_the_table_knows(tmp_path):
    """A commit candidate for a recipe without [base.git]: the sdist of the table that vendors it (its
    sha256 from the table: no index asked); the cache's import record stands in for the download."""
    ws = Workspace.at(tmp_path / "work")
    row = vendored.by_version("0.3.35")
    key = "sdist-llama-cpp-python-0.3.35-0123456789ab"
    record = {"key": key, "sdist_sha256": row.sha256, "upstream": f"x@{V35}", "upstream_verified": True}
    ws.base_meta(key).parent.mkdir(parents=True, exist_ok=True)
    ws.base_meta(key).write_text(json.dumps(record))
    recipe = _recipe_without_git(tmp_path)
    base, prov = bases.resolve_base(recipe, bases.parse_onto(V35), ws, offline=True)
    assert base.route == "sdist" and base.sdist.version == "0.3.35" and base.sdist.sha256 == row.sha256
    assert base.upstream == f"ggml-org/llama.cpp@{V35}"
    assert prov["sha256_from"] == "patchkit's table (patchkit/vendored.py)"
    assert prov["route_from"] == "patchkit's table: sdist:0.3.35 vendors it"
    # a commit the table does not know, and no URL: one line naming --git-url and the git route
    with pytest.raises(RecipeError, match=r"pass --git-url \(no llama-cpp-python sdist .*take the git route"):
        bases.resolve_base(recipe, bases.parse_onto(OTHER), ws, offline=True)
    # an sdist candidate of a known version needs no index for its sha256, so it works --offline
    sbase, sprov = bases.resolve_base(recipe, bases.parse_onto("sdist:0.3.35"), ws, offline=True)
    assert sbase.sdist.sha256 == row.sha256 and sprov["vendored_commit"] == V35


def test_the_git_route_line_names_the_sdists_of_the_table(tmp_path):
    ws = Workspace.at(tmp_path / "work")
    assert bases.sdists_vendoring(ws, V35) == ["sdist:0.3.35"]  # from the table, nothing cached
    assert bases.sdists_vendoring(ws, OTHER) == []
