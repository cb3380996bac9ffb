"""Patches that add files (issue 28), on the real llama.cpp 0c1e57098 tree with real git, CMake, Ninja and
nvcc: a build folder reused from another variant is configured again (CMake's file(GLOB) lists are
read at configure time only), the compile check compiles an added template instance and leaves out
the units the configuration does not build, and a killed Ninja's unfinished units are not ok."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit import source
from patchkit.build import unitcheck
from patchkit.options import Context
from patchkit.recipe import load_recipe
from patchkit.run import pipeline
from patchkit.workspace import Workspace

from .conftest import copy_base
from .test_source_series import TOY_BASE, _make_patch

HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()
CUDA = "ggml/src/ggml-cuda/"
PROBE = "src/models/patchkit-probe.cpp"  # src/CMakeLists.txt: file(GLOB LLAMA_MODELS_SOURCES "models/*.cpp")
NEW_INSTANCE = CUDA + "template-instances/mmf-instance-ncols_17.cu"
VEC = CUDA + "template-instances/fattn-vec-instance-f16-q4_0.cu"  # built only with GGML_CUDA_FA_ALL_QUANTS


OPTIONS = '"-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"'
CPU = f'\n[build]\nbackend = "cpu"\ncmake-options = [{OPTIONS}]\n'


def _write(rel: str, text: str):
    def edit(root: Path) -> None:
        (root / rel).write_text(text)

    return edit


def _append(*rels: str):
    def edit(root: Path) -> None:
        for rel in rels:
            p = root / rel
            p.write_text(p.read_text() + "\n// patchkit test edit\n")

    return edit


def _project(work, base, tmp_path, patches: dict[str, tuple], build: str = ""):
    """A recipe on the sdist base with these patches (name -> (edit, subject), each on top of the last)."""
    series, files = "", {}
    for i, (name, (edit, subject)) in enumerate(patches.items()):
        files[f"patches/{name}"] = _make_patch(work, base, tmp_path, edit, subject)
        dep = f'depends-on = ["{i:04d}"]\n' if i else ""
        series += f'\n[[series]]\nfile = "patches/{name}"\nid = "{i + 1:04d}"\n{dep}'
    proj = tmp_path / "proj"
    (proj / "recipes").mkdir(parents=True)
    for rel, text in files.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    (proj / "recipes" / "toy.toml").write_text(TOY_BASE + series + build)
    return proj


def _apply(proj: Path, ws_root: Path):
    recipe = load_recipe(str(proj / "recipes" / "toy.toml"))
    ctx = Context(recipe=recipe, ws=Workspace.at(ws_root), offline=True)
    base = source.fetch(recipe.base, ctx.ws, offline=True)
    return recipe, ctx, base, pipeline.apply(ctx, base)


def _lists_probe(bdir: Path) -> bool:
    """Whether the configured build compiles the probe: libllama compiles src/models/*.cpp as a unity
    build (UNITY_BUILD ON), so its configure writes the list into Unity/unity_<n>_cxx.cxx."""
    unity = bdir / "src" / "CMakeFiles" / "llama.dir" / "Unity"
    return any("models/patchkit-probe.cpp" in f.read_text() for f in unity.glob("*.cxx"))


def test_a_reused_build_folder_is_configured_again_when_a_patch_adds_a_file(work, base, tmp_path):
    """CPU configure (about half a minute each): base's build folder, moved to +0001 (which adds a
    source that src/CMakeLists.txt's GLOB picks up), must list the new unit before Ninja runs."""
    probe = _write(PROBE, '#include "models.h"\n\nint llama_patchkit_probe() { return 1; }\n')
    proj = _project(work, base, tmp_path, {"0001-add.patch": (probe, "models: add a probe unit")}, CPU)
    ws = copy_base(work, base, tmp_path / "w")
    recipe, ctx, base_info, states = _apply(proj, ws.root)
    opts = build_mod.options_from(recipe, backend="cpu")
    tc = build_mod.toolchain(opts)
    root = build_mod.build_root(ctx.ws, recipe, opts)
    bdir = root / "build"
    for st in states:  # base, then +0001 in the same folder, as build_variants moves it
        tree = build_mod.move_tree(ctx.ws, recipe, root, base_info, st.head)
        build_mod.configure(tree, bdir, opts, tc, tmp_path / f"configure-{st.name}.log")
        listed = _lists_probe(bdir)
        assert listed == (st.name != "base"), f"{st.name}: build.ninja lists the probe: {listed}"
    assert (tmp_path / "configure-+0001.log").is_file()  # CMake ran again for +0001
    # the same head again: no configure
    build_mod.configure(tree, bdir, opts, tc, tmp_path / "configure-same.log")
    assert not (tmp_path / "configure-same.log").exists()


KILLER = """#!/bin/sh
# a compiler launcher that kills its Ninja (as the OOM killer or kill -9 would) at one unit
case "$*" in
  *ggml-cpu/traits.cpp*)
    p=$PPID
    while [ "$p" -gt 1 ] && [ "$(cat /proc/$p/comm)" != ninja ]; do p=$(cut -d' ' -f4 /proc/$p/stat); done
    kill -9 "$p"; sleep 2; exit 1;;
esac
exec "$@"
"""


def test_a_killed_ninja_leaves_its_units_not_ok(work, base, tmp_path):
    """CPU compile check (a configure and no compile): Ninja killed at the touched unit."""
    killer = tmp_path / "killer.sh"
    killer.write_text(KILLER)
    killer.chmod(0o755)
    edit = _append("ggml/src/ggml-cpu/traits.cpp")
    build = f'\n[build]\nbackend = "cpu"\ncmake-options = [{OPTIONS}, "-DCMAKE_CXX_COMPILER_LAUNCHER={killer}"]\n'
    proj = _project(work, base, tmp_path, {"0001-edit.patch": (edit, "ggml-cpu: edit")}, build)
    ws = copy_base(work, base, tmp_path / "w")
    recipe, ctx, base_info, states = _apply(proj, ws.root)
    opts = build_mod.options_from(recipe, backend="cpu")
    items = unitcheck.check(recipe, base_info, ctx.ws, states, opts, logs=tmp_path / "logs")
    units = {i.source: i for i in items if not i.cleared}
    unit = units["ggml/src/ggml-cpu/traits.cpp"]
    assert not unit.ok and unit.error.startswith(unitcheck.UNFINISHED), unit
    assert "killed (signal 9)" in unit.error
    assert unitcheck.interrupted(items)


@pytest.mark.skipif(not HAS_NVCC, reason="no nvcc: compiling CUDA needs the CUDA toolkit")
def test_the_compile_check_compiles_an_added_instance_and_leaves_out_unbuilt_units(work, base, tmp_path, cli):
    """sm_89 compile check (two CUDA configures, two small units: a few minutes on 2 cores): +0001 edits
    arange.cu and a vec instance the default configuration does not build; +0001+0002 adds an mmf
    template instance. The check folder, configured for +0001, is configured again for +0001+0002."""
    edit = _append(CUDA + "arange.cu", VEC)
    add = _write(NEW_INSTANCE, '#include "../mmf.cuh"\n\nDECL_MMF_CASE(17);\n')
    patches = {"0001-edit.patch": (edit, "CUDA: edit"), "0002-add.patch": (add, "CUDA: add an mmf instance")}
    build = f'\n[build]\nbackend = "cuda"\narch = ["89"]\ncmake-options = [{OPTIONS}]\n'
    proj = _project(work, base, tmp_path, patches, build)
    ws = copy_base(work, base, tmp_path / "w")
    r = cli("build", "-r", "toy", "--check", "-j", "2", "--work", str(ws.root), "--offline", cwd=proj, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert f"ok   +0001+0002   sm_89   {NEW_INSTANCE}" in r.stdout, r.stdout
    assert f"left +0001        sm_89   {VEC}  (not compiled: {unitcheck.NOT_CONFIGURED})" in r.stdout, r.stdout
    assert "FAIL" not in r.stdout
    assert list((ws.builds("toy", "check-cuda-89") / "build").rglob("mmf-instance-ncols_17.cu.o"))


def test_a_failed_compile_exits_1(work, base, tmp_path, cli):
    """CPU compile check of a unit that does not compile: a step failure (exit 1), not an input error."""
    broken = _append("ggml/src/ggml-cpu/traits.cpp")

    def edit(root: Path) -> None:
        broken(root)
        p = root / "ggml/src/ggml-cpu/traits.cpp"
        p.write_text(p.read_text() + "this is not C++;\n")

    proj = _project(work, base, tmp_path, {"0001-broken.patch": (edit, "ggml-cpu: break")}, CPU)
    ws = copy_base(work, base, tmp_path / "w")
    r = cli("build", "-r", "toy", "--check", "--work", str(ws.root), "--offline", cwd=proj, check=False)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("patchkit: compile check: 1/1 translation units failed"), last
    assert "traits.cpp" in last
