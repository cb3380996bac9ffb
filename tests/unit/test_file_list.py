"""A patch that adds, removes or renames files (issue 28): what configure depends on, the "compiles to
base's code" check, the compile check's units under either source layout, and the report's left-out
units, with real git."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from patchkit import build
from patchkit.build import compiled, unitcheck
from patchkit.report.check import counts
from patchkit.report.evidence import CheckConfig
from patchkit.results.data.check import CheckItem
from tests.conftest import git

_git = functools.partial(git, hermetic=True)  # no variable of this process, no git config of the user's


def _commit(repo: Path, msg: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", msg)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "tree"
    (r / "ggml" / "src" / "ggml-cuda" / "template-instances").mkdir(parents=True)
    (r / "ggml" / "src" / "CMakeLists.txt").write_text('file(GLOB SRCS "ggml-cuda/*.cu")\n')
    (r / "ggml" / "src" / "ggml-cuda" / "a.cu").write_text('#include "a.cuh"\n')
    (r / "ggml" / "src" / "ggml-cuda" / "a.cuh").write_text("// a\n")
    _git(r, "init", "-q")
    return r


def test_configure_inputs_change_with_the_file_list_and_cmake_files_only(repo):
    _commit(repo, "base")
    first = build.configure_inputs(repo)
    (repo / "ggml" / "src" / "ggml-cuda" / "a.cuh").write_text("// a, edited\n")
    _commit(repo, "edit a source")
    assert build.configure_inputs(repo) == first  # Ninja rebuilds what an edit reaches; no configure needed
    inst = repo / "ggml" / "src" / "ggml-cuda" / "template-instances" / "new.cu"
    inst.write_text('#include "../a.cuh"\n')
    _commit(repo, "add an instance")
    added = build.configure_inputs(repo)
    assert added != first
    inst.rename(inst.with_name("renamed.cu"))
    _commit(repo, "rename it")
    assert build.configure_inputs(repo) not in (first, added)
    before = build.configure_inputs(repo)
    (repo / "ggml" / "src" / "CMakeLists.txt").write_text('file(GLOB SRCS "ggml-cuda/*.cu" "x/*.cu")\n')
    _commit(repo, "edit a CMake file")
    assert build.configure_inputs(repo) != before


def test_an_added_or_renamed_file_is_never_same_code(repo):
    old = _commit(repo, "base")
    inputs = {"ggml/src/ggml-cuda/a.cu", "ggml/src/ggml-cuda/a.cuh"}
    (repo / "ggml" / "src" / "ggml-cuda" / "b.cu").write_text("// b\n")
    new = _commit(repo, "add b.cu")
    changed = compiled.changed_files(repo, old, new)
    assert changed == ["ggml/src/ggml-cuda/b.cu"]
    # base's deps log never saw b.cu: without the file list, an added unit read as "not compiled here"
    assert compiled.same_code_reason(changed, inputs, "cpu") != ""
    layout = compiled.added_or_removed(repo, old, new)
    assert layout == ["ggml/src/ggml-cuda/b.cu"]
    assert compiled.same_code_reason(changed, inputs, "cpu", layout) == ""
    (repo / "ggml" / "src" / "ggml-cuda" / "a.cu").rename(repo / "ggml" / "src" / "ggml-cuda" / "c.cu")
    moved = _commit(repo, "rename a.cu")
    assert "ggml/src/ggml-cuda/a.cu" in compiled.changed_files(repo, new, moved)  # both names of a rename
    assert sorted(compiled.added_or_removed(repo, new, moved)) == ["ggml/src/ggml-cuda/a.cu", "ggml/src/ggml-cuda/c.cu"]


@pytest.mark.parametrize("root", ["ggml/src", "src"])
def test_the_units_are_found_under_the_trees_own_layout(tmp_path, root):
    cuda = tmp_path / root / "ggml-cuda"
    cuda.mkdir(parents=True)
    (cuda / "fattn-common.cuh").write_text("// common\n")
    (cuda / "fattn.cu").write_text('#include "fattn-common.cuh"\n')
    (cuda / "other.cu").write_text("// none\n")
    (tmp_path / root / "ggml.c").write_text('#include "ggml-cuda/fattn-common.cuh"\n')
    assert build.source_root(tmp_path) == root
    sources, _ = unitcheck._units(tmp_path, [f"{root}/ggml-cuda/fattn-common.cuh"], "cuda")
    assert sources == [f"{root}/ggml-cuda/fattn.cu"]
    everything, _ = unitcheck._units(tmp_path, [f"{root}/ggml-cuda/fattn-common.cuh"], "cpu")
    assert everything == [f"{root}/ggml-cuda/fattn.cu", f"{root}/ggml.c"]


def _config(items, status="ok", reason=""):
    return CheckConfig(config="cuda-89", status=status, reason=reason, items=items, logs=[])


def test_units_the_configuration_does_not_build_are_left_out_not_failed():
    items = [
        CheckItem(variant="+0001", arch="89", source="a.cu", ok=True, error="", cleared=""),
        CheckItem(variant="+0001", arch="89", source="vec.cu", ok=True, error="", cleared=unitcheck.NOT_CONFIGURED),
    ]
    line = counts(_config(items))[0]
    assert "1 of 1 sources compiled" in line
    assert f"1 left out: {unitcheck.NOT_CONFIGURED}" in line
    nothing = counts(_config(items[1:], "not_run", "compiled nothing"))[0]
    assert "compiled nothing" in nothing and "0 of 0" not in nothing


def test_a_unit_ninja_did_not_finish_makes_the_check_interrupted():
    done = unitcheck.CheckItem(variant="v", arch="89", source="a.cu", ok=True)
    cut = unitcheck.CheckItem(
        variant="v", arch="89", source="b.cu", ok=False, error=f"{unitcheck.UNFINISHED} was killed (signal 9)"
    )
    failed = unitcheck.CheckItem(variant="v", arch="89", source="c.cu", ok=False, error="c.cu:1: error: x")
    assert unitcheck.interrupted([done, cut])
    assert not unitcheck.interrupted([done, failed])


def test_an_added_text_file_that_cmake_never_reads_makes_no_configure(repo):
    """issue 34: a patch that only added a .txt file made the build configure again (new version headers with
    the variant's commit: 144 CPU steps compiled again). A file of a kind never compiled counts only where a
    CMake file names it or a file(GLOB) matches it; every other file still counts (never stale code)."""
    (repo / "ggml" / "src" / "CMakeLists.txt").write_text(
        'file(GLOB SRCS "ggml-cuda/*.cu")\nfile(GLOB LIC "${PROJECT_SOURCE_DIR}/licenses/LICENSE-*")\n'
        "configure_file(${CMAKE_CURRENT_SOURCE_DIR}/kernels.txt k.txt COPYONLY)\n"
    )
    _commit(repo, "base")
    first = build.configure_inputs(repo)
    for rel in ("docs/notes.txt", "ggml/src/ggml-cuda/README.md", "scripts/gen.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
        _commit(repo, f"add {rel}")
        assert build.configure_inputs(repo) == first, rel
    for rel in ("ggml/src/kernels.txt", "licenses/LICENSE-x.txt", "ggml/src/new.c"):  # named, globbed, compiled
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
        _commit(repo, f"add {rel}")
        now = build.configure_inputs(repo)
        assert now != first, rel
        first = now
    # a GLOB whose last part is a variable: every file counts
    (repo / "ggml" / "src" / "CMakeLists.txt").write_text('file(GLOB SRCS "ggml-cuda/${PATTERN}")\n')
    _commit(repo, "a variable pattern")
    before = build.configure_inputs(repo)
    (repo / "docs" / "more.txt").write_text("x\n")
    _commit(repo, "add more.txt")
    assert build.configure_inputs(repo) != before
