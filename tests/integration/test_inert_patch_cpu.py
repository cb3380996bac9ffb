"""A patch that compiles nothing (issue 34: an added notes.txt configured again and rebuilt every CPU step), on the
real llama.cpp 0c1e57098 tree with real git, CMake and Ninja: the variant's commit no longer reaches the files
CMake generates (build-info.cpp, llama-version.h), so only ggml.c (ggml's own CMakeLists.txt asks git for
ggml_commit()) compiles again; a changed source still compiles."""

from __future__ import annotations

import re

import pytest

from patchkit import build as build_mod

from .conftest import copy_base
from .test_file_list import CPU, _append, _apply, _project, _write

TARGETS = ["ggml-base", "llama-common-base"]  # ggml's core and build-info.cpp: small, and both see the commit
_COMPILED = re.compile(r"^\[\d+/\d+\] Building \w+ object (\S+)$", re.M)


@pytest.mark.slow
def test_a_text_only_patch_compiles_nothing_of_llama_and_a_changed_source_compiles(work, base, tmp_path):
    patches = {
        "0001-notes.patch": (_write("notes.txt", "notes only\n"), "notes: add"),
        "0002-alloc.patch": (_append("ggml/src/ggml-alloc.c"), "ggml: edit ggml-alloc.c"),
    }
    proj = _project(work, base, tmp_path, patches, CPU)
    ws = copy_base(work, base, tmp_path / "w")
    recipe, ctx, base_info, states = _apply(proj, ws.root)
    opts = build_mod.options_from(recipe, backend="cpu")
    tc = build_mod.toolchain(opts)
    root = build_mod.build_root(ctx.ws, recipe, opts)
    compiled = {}
    for st in states:  # base, +0001 (notes.txt), +0001+0002 (ggml-alloc.c), in one build folder
        tree = build_mod.move_tree(ctx.ws, recipe, root, base_info, st.head)
        build_mod.configure(tree, root / "build", opts, tc, tmp_path / f"configure-{st.name}.log")
        out = build_mod.run_ninja(root / "build", TARGETS, opts, tc, tmp_path / f"build-{st.name}.log", st.name)
        compiled[st.name] = _COMPILED.findall(out.stdout)
    assert any(o.endswith("build-info.cpp.o") for o in compiled["base"]), compiled["base"]
    names = {k: sorted(o.rsplit("/", 1)[-1] for o in v) for k, v in compiled.items()}
    assert names["+0001"] == ["ggml.c.o"], compiled["+0001"]  # on main: build-info.cpp.o too
    assert names["+0001+0002"] == ["ggml-alloc.c.o", "ggml.c.o"], compiled["+0001+0002"]
    info = (root / "build" / "common" / "build-info.cpp").read_text()
    assert f'LLAMA_COMMIT = "{base_info.commit[:7]}' in info, info  # the base's commit, every variant
