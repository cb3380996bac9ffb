"""The compile check's units when the series has local test-only patches (issue 37, patches/local/0005): a PR
variant compiles the units its PR patches reach, never those only a local patch changes (0005's 126 split
instance units were compiled for each PR variant); base compiles the local patches' units once, and a check
without base says they were not compile-checked. Real git: a local upstream repository, real patch files,
`patchkit.series` applying them; CMake and Ninja (configure, the object targets, the compile) are replaced by
recorders, since which units are selected needs no compile."""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchkit import series, source
from patchkit.build import BuildOptions, unitcheck
from patchkit.recipe import load_recipe
from patchkit.report.check import not_tested
from patchkit.report.evidence import CheckConfig
from patchkit.results.data.check import LOCAL_AT_BASE
from patchkit.workspace import Workspace
from tests.conftest import commit_files, git

CUDA = "ggml/src/ggml-cuda"
FILES = {
    f"{CUDA}/fattn.cu": '#include "fattn-mma.cuh"\nint fattn;\n',
    f"{CUDA}/fattn-mma.cuh": "// the MMA kernel\n",
    f"{CUDA}/mmq.cu": "int mmq;\n",
    f"{CUDA}/template-instances/inst-a.cu": '#include "../fattn-mma.cuh"\nint a64, a256;\n',
    f"{CUDA}/template-instances/inst-b.cu": '#include "../fattn-mma.cuh"\nint b;\n',
    "tests/test-backend-ops.cpp": "int main() { return 0; }\n",
}
RECIPE = """
[recipe]
name = "toy"

[base]
source = "git"

[base.git]
url = "{url}"
commit = "{commit}"

[[series]]
file = "patches/0001-fattn.patch"
id = "0001"

# listed between the PR patches: patchkit.series applies the local ones first whatever the listing
[[series]]
file = "patches/local/0001-split.patch"
id = "split"
local = true

[[series]]
file = "patches/0002-mmq.patch"
id = "0002"

[[series]]
file = "patches/local/0002-tests.patch"
id = "tests"
local = true

[build]
backend = "cuda"
arch = ["89"]
"""


_git = functools.partial(git, hermetic=True)


def _patch(repo: Path, up: str, out: Path, edits: dict[str, str | None]) -> None:
    """A format-patch of `edits` (path -> new text, None: removed) on upstream's commit."""
    _git(repo, "checkout", "-q", "--detach", up)
    commit_files(repo, edits, out.stem, hermetic=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_git(repo, "format-patch", "--stdout", "-1", "HEAD") + "\n")


@pytest.fixture
def toy(tmp_path):
    up_repo = tmp_path / "llama.cpp"
    up = commit_files(up_repo, FILES, "upstream", hermetic=True)
    proj = tmp_path / "proj"
    inst = f"{CUDA}/template-instances"
    _patch(
        up_repo, up, proj / "patches/0001-fattn.patch", {f"{CUDA}/fattn.cu": FILES[f"{CUDA}/fattn.cu"] + "int gqa;\n"}
    )
    _patch(up_repo, up, proj / "patches/0002-mmq.patch", {f"{CUDA}/mmq.cu": "int mmq, tile;\n"})
    split = {f"{inst}/inst-a.cu": None}
    split |= {f"{inst}/inst-a-dkq_{d}.cu": f'#include "../fattn-mma.cuh"\nint a{d};\n' for d in (64, 256)}
    _patch(up_repo, up, proj / "patches/local/0001-split.patch", split)
    _patch(up_repo, up, proj / "patches/local/0002-tests.patch", {"tests/test-backend-ops.cpp": "int main() {}\n"})
    (proj / "recipes").mkdir(parents=True)
    (proj / "recipes" / "toy.toml").write_text(RECIPE.format(url=up_repo, commit=up))
    recipe = load_recipe(str(proj / "recipes" / "toy.toml"))
    ws = Workspace.at(tmp_path / "work")
    base = source.fetch(recipe.base, ws, offline=True)
    states, errors = series.apply_all(recipe, base, ws, series.plan_variants(recipe))
    assert not errors
    return recipe, ws, base, {s.name: s for s in states}


@pytest.fixture
def compiles(monkeypatch):
    """No CMake, no Ninja: each configured unit is an object, and every compile is recorded (variant -> units)."""
    done: dict[str, list[str]] = {}

    class Tc:
        env: dict[str, str] = {}

    def compile_units(bdir, objs, opts, tc, log, desc, tree):
        done[desc.split()[1]] = sorted(objs)
        return dict.fromkeys(objs, ""), {}

    monkeypatch.setattr(unitcheck, "toolchain", lambda opts: Tc())
    monkeypatch.setattr(unitcheck, "configure", lambda *a, **k: None)
    monkeypatch.setattr(unitcheck, "object_targets", lambda bdir, sources, env: {s: f"{s}.o" for s in sources})
    monkeypatch.setattr(unitcheck, "compile_units", compile_units)
    return done


SPLIT = [f"{CUDA}/template-instances/inst-a-dkq_256.cu", f"{CUDA}/template-instances/inst-a-dkq_64.cu"]


def test_a_pr_variant_compiles_only_the_units_its_pr_patches_reach(toy, compiles, tmp_path):
    recipe, ws, base, st = toy
    assert [p["local"] for p in st["+0001"].patches] == [True, True, False]  # applied first, listed or not
    opts = BuildOptions(backend="cuda", archs=("89",))
    items = unitcheck.check(recipe, base, ws, [st["+0001"], st["+0001+0002"]], opts, logs=tmp_path / "logs")
    # the series end's change is fattn.cu and mmq.cu: the split units the local patch adds are not its change
    assert compiles["+0001+0002"] == [f"{CUDA}/fattn.cu", f"{CUDA}/mmq.cu"]
    assert compiles["+0001"] == [f"{CUDA}/fattn.cu", f"{CUDA}/mmq.cu"]  # its own, and the end's (`also`)
    # the split units +0001 did not compile are said to be left to base, which this check did not include
    left = [i for i in items if i.cleared == LOCAL_AT_BASE]
    assert [(i.variant, i.source) for i in left] == [("base", s) for s in SPLIT]
    config = CheckConfig(config="cuda-89", status="ok", reason="", items=items, logs=[])
    lines = [m.text for m in not_tested([], SimpleNamespace(builds=[SimpleNamespace(checks=[config])]))]
    assert lines[-1].startswith("Units only local test-only patches change: not compile-checked for arch 89 (2 units)")


def test_base_compiles_the_local_patches_units_once(toy, compiles, tmp_path):
    recipe, ws, base, st = toy
    opts = BuildOptions(backend="cuda", archs=("89",))
    states = [st["base"], st["+0001"], st["+0001+0002"]]
    items = unitcheck.check(recipe, base, ws, states, opts, logs=tmp_path / "logs")
    assert compiles["+0001"] == [f"{CUDA}/fattn.cu", f"{CUDA}/mmq.cu"]
    assert compiles["base"] == SPLIT  # the local patches' units (tests/ is outside the check)
    assert not [i for i in items if i.cleared == LOCAL_AT_BASE]


def test_base_alone_compiles_its_local_patches_units(toy, compiles, tmp_path):
    recipe, ws, base, st = toy
    unitcheck.check(recipe, base, ws, [st["base"]], BuildOptions(backend="cuda", archs=("89",)), logs=tmp_path)
    assert compiles == {"base": SPLIT}
