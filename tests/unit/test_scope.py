"""patchkit.run.scope (`--changed`): which cases an edit can affect, on the real FA MMA header
(tests/fixtures/sweep/fattn-mma-f16.cuh, llama.cpp 0c1e57098) and in a real git repository."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from patchkit.errors import RecipeError
from patchkit.recipe import Affects, parse_recipe
from patchkit.run import scope
from patchkit.workspace import Workspace
from tests.conftest import git

HEADER = Path(__file__).resolve().parents[1] / "fixtures" / "sweep" / "fattn-mma-f16.cuh"
TEXT = HEADER.read_bytes().decode("utf-8", "surrogateescape")
MACRO = "GGML_CUDA_FATTN_MMA_CONFIG_CASE"
ROW = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8, 128, 2,  64, 128, 128, 128, 2, true);"
RULE = Affects(file="ggml/src/ggml-cuda/fattn-mma-f16.cuh", macro=MACRO, params="hsk={DKQ},hsv={DV},")


_git = functools.partial(git, hermetic=True)  # no variable of this process, no git config of the user's


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


def test_a_row_edit_gives_the_old_and_new_row():
    new = _edit(TEXT, ROW, ROW.replace("128, 2, true", "128, 1, true"))
    rows = scope.changed_rows(TEXT, new, MACRO)
    assert rows is not None and len(rows) == 2
    assert {r["nstages_target"] for r in rows} == {1, 2}
    assert all((r["DKQ"], r["DV"], r["ncols"]) == (256, 256, 8) for r in rows)


def test_any_other_edit_gives_none():
    assert scope.changed_rows(TEXT, _edit(TEXT, ROW, ROW + " // note"), MACRO) is not None  # a comment after it
    code = _edit(TEXT, ROW, ROW + "\n    int x = 0;")
    assert scope.changed_rows(TEXT, code, MACRO) is None
    assert scope.changed_rows(TEXT, _edit(TEXT, "static_assert", "static_assert "), MACRO) is None
    assert scope.changed_rows(TEXT, TEXT, "NO_SUCH_MACRO") is None


def test_rule_params_put_the_columns_in_and_escape_them():
    rows = scope.changed_rows(TEXT, _edit(TEXT, ROW, ROW.replace(" 64, 128", " 32, 128")), MACRO)
    assert rows
    p = scope.rule_params(RULE, rows, "r.toml: affects[0]")
    assert p == "(?:hsk=256,hsv=256,)"
    ok = "hsk=256,hsv=256,nh=4,nr23=[6,1],kv=4096,nb=1,type_K=q4_0"
    assert re.search(p, ok) and not re.search(p, ok.replace("hsk=256", "hsk=128"))
    bad = Affects(file=RULE.file, macro=MACRO, params="hsk={DKQ},x={nosuch}")
    with pytest.raises(RecipeError, match=r"affects\[0\]\.params: \{nosuch\} is not a column"):
        scope.rule_params(bad, rows, "r.toml: affects[0]")


def test_both_matches_only_what_each_matches():
    a, b = r"^hsk=256,.*type_K=q4_0", "(?:hsk=256,hsv=256,)|(?:hsk=128,hsv=128,)"
    r = scope.both(a, b)
    assert re.search(r, "hsk=256,hsv=256,kv=1,type_K=q4_0")
    assert not re.search(r, "hsk=256,hsv=256,kv=1,type_K=f16")
    assert not re.search(r, "hsk=128,hsv=128,kv=1,type_K=q4_0")
    assert scope.both("", b) == b and scope.both(a, "") == a


def test_recipe_affects_is_checked(tmp_path):
    base = '[recipe]\nname = "x"\n[base]\nsource = "git"\n[base.git]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n'
    ok = parse_recipe(
        base + f'[[affects]]\nfile = "{RULE.file}"\nmacro = "{MACRO}"\nparams = "{RULE.params}"\n', tmp_path
    )
    assert ok.affects == (RULE,)
    with pytest.raises(RecipeError, match=r"affects\[0\]\.macro"):
        parse_recipe(base + '[[affects]]\nfile = "a.h"\nmacro = "1x"\nparams = "p"\n', tmp_path)
    with pytest.raises(RecipeError, match=r"affects\[0\]\.file"):
        parse_recipe(base + '[[affects]]\nfile = "../a.h"\nmacro = "M"\nparams = "p"\n', tmp_path)
    with pytest.raises(RecipeError, match=r"unknown key 'affects\[0\].nope'"):
        parse_recipe(base + '[[affects]]\nfile = "a.h"\nmacro = "M"\nparams = "p"\nnope = 1\n', tmp_path)


@pytest.fixture
def repo(tmp_path):
    """A work folder whose cache repo holds three commits: the header, a row edit, a code edit."""
    ws = Workspace.at(tmp_path / "work")
    src = tmp_path / "src"
    (src / "ggml/src/ggml-cuda").mkdir(parents=True)
    _git(src, "init", "-q")
    header = src / RULE.file
    commits = []
    texts = (
        TEXT,
        _edit(TEXT, ROW, ROW.replace("128, 2, true", "128, 1, true")),
        TEXT + "\nint x;\n",
        _edit(TEXT, ROW, ROW.replace(" 64, 128", " 32, 128") + " // tuned \\"),  # splices the next row in
        _edit(TEXT, ROW, ROW.replace("256, 256,", "DKQ, DV,")),
    )
    for text in texts:
        header.write_bytes(text.encode("utf-8", "surrogateescape"))
        _git(src, "add", "-A")
        _git(src, "commit", "-q", "-m", "c")
        commits.append(_git(src, "rev-parse", "HEAD"))
    ws.repo.parent.mkdir(parents=True, exist_ok=True)
    _git(tmp_path, "clone", "-q", "--bare", str(src), str(ws.repo))
    return ws, commits


def test_affected_in_a_real_repository(repo, tmp_path):
    ws, (c0, c1, c2, _, _) = repo
    recipe = parse_recipe(
        '[recipe]\nname = "x"\n[base]\nsource = "git"\n[base.git]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n'
        f'[[affects]]\nfile = "{RULE.file}"\nmacro = "{MACRO}"\nparams = "{RULE.params}"\n',
        tmp_path / "r.toml",
    )
    files, rows, regex, why = scope.affected(ws, recipe, c0, c1)
    assert files == [RULE.file] and len(rows) == 2 and regex == "(?:hsk=256,hsv=256,)"
    assert "DKQ=256, DV=256, ncols=8" in why
    files, rows, regex, why = scope.affected(ws, recipe, c0, c2)
    assert regex is None and "changed outside the rows" in why
    assert scope.affected(ws, recipe, c0, c0)[2] is None  # nothing changed: every case, to be safe


def test_edits_the_compiler_reads_otherwise_or_with_names_for_cells_measure_every_case(repo, tmp_path):
    # issue 29: a row comment ending in a backslash swallows the next row (the compiler reads a row gone
    # that the text does not show: was "(?:hsk=256,hsv=256,)" from the text alone); names for cells (was:
    # "(?:hsk=DKQ,hsv=DV,)", matching no case)
    ws, (c0, _, _, c3, c4) = repo
    recipe = parse_recipe(
        '[recipe]\nname = "x"\n[base]\nsource = "git"\n[base.git]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n'
        f'[[affects]]\nfile = "{RULE.file}"\nmacro = "{MACRO}"\nparams = "{RULE.params}"\n',
        tmp_path / "r.toml",
    )
    regex, why = scope.affected(ws, recipe, c0, c3)[2:]
    assert regex is None and "the compiler reads other changed rows" in why
    assert "compiler (256, 256, 8, 128, 2, 64," in why and "(256, 256, 16, 256, 1," in why
    assert "\n" not in why
    regex, why = scope.affected(ws, recipe, c0, c4)[2:]
    assert regex is None and "DKQ = 'DKQ', not an integer" in why
    assert not any((ws.cache / "tmp").iterdir())


def test_a_resumed_changed_run_follows_the_code_as_it_is_now(repo, tmp_path):
    """issue 34: a --changed run resumed with --run after another patch was edited kept the variant list of its
    start: the edited +0001 was rebuilt but never tested ("unchanged since its last build", the old key)."""
    from types import SimpleNamespace

    from patchkit import build as build_mod
    from patchkit.results import Bundle
    from patchkit.run import pipeline
    from patchkit.series import VariantState
    from patchkit.workspace import write_json

    ws, (c0, c1, _, _, _) = repo
    recipe = parse_recipe(
        '[recipe]\nname = "x"\n[base]\nsource = "git"\n[base.git]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n'
        f'[[affects]]\nfile = "{RULE.file}"\nmacro = "{MACRO}"\nparams = "{RULE.params}"\n',
        tmp_path / "r.toml",
    )
    bopts = build_mod.BuildOptions(backend="cpu", archs=())
    tc = build_mod.toolchain(bopts)

    def state(name: str, key: str, head: str) -> VariantState:
        return VariantState(name=name, key=key, base=c0, head=head, patches=[])

    def built(st: VariantState) -> None:  # its last build, as the build lane leaves it
        data = {"key": build_mod.build_key(st, bopts, tc), "result": {"head": st.head}}
        write_json(build_mod.bin_dir(ws, recipe, bopts, st.name) / "manifest.json", data)

    base, one_then, two = state("base", "kb", c0), state("+0001", "k1", c0), state("+0001+0002", "k2", c1)
    for st in (base, one_then, state("+0001+0002", "k2-before", c0)):
        built(st)
    ctx, opts = SimpleNamespace(ws=ws, recipe=recipe), SimpleNamespace(changed=True, build=bopts)
    first = pipeline.run_scope(ctx, None, [base, one_then, two], opts)
    assert set(first.unchanged) == {"base", "+0001"} and set(first.changed) == {"+0001+0002"}
    held = Bundle.create(ws.runs("x"), recipe="x", run_id="r1", meta={"scope": first.to_dict()})
    built(two)  # the run built +0001+0002, then stopped; patch 0001 was edited (+0001 is now c1's code)
    one_now = state("+0001", "k1-edited", c1)
    again = pipeline.run_scope(ctx, held, [base, one_now, two], opts)
    assert set(again.unchanged) == {"base"} and set(again.changed) == {"+0001", "+0001+0002"}
    assert again.changed["+0001"]["since"] == c0 and again.changed["+0001+0002"]["since"] == c0
    assert again.params == "(?:hsk=256,hsv=256,)"
    assert held.data["scope"] == again.to_dict()  # kept in the run folder: a second resume starts from it
