"""A variant whose patches compile nothing here stays "no compiled change" whatever second its files were touched in
(issue 37: the CI rehearsal of 2026-12-05 12:49 measured +0001 on the CPU, its binary's ggml commit "000fa24-dirty").

patchkit.build.build_one checks the tree out at the variant's head, then touches the changed files (newer than any
object): git's index keeps the times of the checkout, so where the touch falls in a later second git's plumbing
takes those files for changed, and ggml's CMake, which asks `git diff-index --quiet HEAD -- .` at the configure a
checkout triggers (the tree's index is one of its configure inputs), wrote "<commit>-dirty" into ggml-version.h:
a generated compiled file base's build does not have, so the same-code check called the variant a compiled change.

Here a small real project does what ggml's CMakeLists.txt does (its lines copied), built by build_one with real
git, CMake and Ninja; the checkout is made to lie in an earlier second than the touch (its files' times and the
index's record of them set 5 s back right after it: what a slow second of a loaded machine does), every run."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit.build import compiled
from patchkit.recipe import load_recipe
from patchkit.series import VariantState
from patchkit.workspace import Workspace
from tests.conftest import commit_files, git

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="needs cmake, ninja, cc"
)

# ggml/CMakeLists.txt's commit and dirty flag (0c1e57098), and common/CMakeLists.txt's configure dependency on the
# tree's git index; version.h stands for ggml-version.h, gpu.cu for a CUDA source the CPU build never compiles
CMAKE = """cmake_minimum_required(VERSION 3.16)
project(toy C)
find_program(GIT_EXE NAMES git git.exe NO_CMAKE_FIND_ROOT_PATH)
execute_process(COMMAND ${GIT_EXE} rev-parse --short HEAD
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    OUTPUT_VARIABLE GGML_BUILD_COMMIT
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
)
execute_process(COMMAND ${GIT_EXE} diff-index --quiet HEAD -- .
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    RESULT_VARIABLE GGML_GIT_DIRTY
    ERROR_QUIET
)
if(DEFINED GGML_GIT_DIRTY AND GGML_GIT_DIRTY EQUAL 1)
    set(GGML_BUILD_COMMIT "${GGML_BUILD_COMMIT}-dirty")
endif()
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/.git REAL_GIT_DIR_LINK)
string(REGEX REPLACE "gitdir: (.*)\\n$" "\\\\1" GIT_DIR ${REAL_GIT_DIR_LINK})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${GIT_DIR}/index")
configure_file(version.h.in ${CMAKE_CURRENT_BINARY_DIR}/version.h @ONLY)
include_directories(${CMAKE_CURRENT_BINARY_DIR})
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_executable(toy main.c)
"""
SOURCES = {
    "CMakeLists.txt": CMAKE,
    "version.h.in": '#define GGML_COMMIT "@GGML_BUILD_COMMIT@"\n',
    "main.c": '#include <stdio.h>\n#include "version.h"\nint main(void) { puts(GGML_COMMIT); return 0; }\n',
    "gpu.cu": "// a kernel\n",
}


def _checkout_a_second_earlier(real):
    """build_mod.move_tree as it is, its checkout then set 5 s in the past (files and the index's record of them)."""

    def move(ws, recipe, root, base, head, tree=None):
        out = real(ws, recipe, root, base, head, tree)
        old = time.time_ns() - 5_000_000_000
        for f in git(out, "ls-files").split():
            os.utime(out / f, ns=(old, old))
        git(out, "update-index", "-q", "--refresh")
        return out

    return move


def test_a_variant_that_changes_no_compiled_file_is_not_dirty(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    base = commit_files(repo, SOURCES, "base")
    head = commit_files(repo, {"gpu.cu": "// a faster kernel\n"}, "0001: the kernel only")

    ws = Workspace(root=tmp_path / "w")
    recipe = load_recipe("default")
    opts = dataclasses.replace(build_mod.options_from(recipe, backend="cpu"), targets=("toy",), cmake_options=())
    root = build_mod.build_root(ws, recipe, opts)
    tree, bdir = root / "tree", root / "build"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), base)
    job = build_mod._Job(
        recipe=recipe, base=None, ws=ws, opts=opts, tc=build_mod.toolchain(opts), root=root, logs=tmp_path / "logs"
    )
    monkeypatch.setattr(build_mod, "move_tree", _checkout_a_second_earlier(build_mod.move_tree))

    def state(name: str, commit: str) -> VariantState:
        return VariantState(name=name, key=name, base=base, head=commit, patches=[])

    first = build_mod.build_one(job, state("base", base), tree, bdir, opts)
    inputs = compiled.compiled_inputs(bdir, tree, opts.targets)
    assert "version.h" in inputs.generated  # the generated file the same-code check compares
    variant = build_mod.build_one(job, state("+0001", head), tree, bdir, opts)

    run = {
        r.variant: subprocess.run([Path(r.bin_dir) / "toy"], capture_output=True, text=True).stdout
        for r in (first, variant)
    }
    assert run == {"base": f"{base[:7]}\n", "+0001": f"{head[:7]}\n"}  # each its own commit, neither "-dirty"
    changed = compiled.changed_files(tree, base, head)
    assert changed == ["gpu.cu"]
    assert compiled.same_code_reason(changed, inputs.at(bdir, tree), "cpu") == (
        "no compiled change on cpu: the series touches only files not compiled here (.)"
    )
