"""The default recipe's [[affects]] units rule against the real code: nvcc compiles two FA MMA template
instances of +0001+0002 (llama.cpp 0c1e57098) to PTX for sm_89 before and after an edit of the
(256, 256, 8) config row (nstages_target 2 -> 1). The instance the rule clears (ncols1_16-ncols2_1,
ncols 16) gives the same PTX; the one it recompiles (ncols1_2-ncols2_4, ncols 8 with ncols2 >= 2, the
only ones that read nstages_target) does not. Each is the unit that instantiates the head size 256 kernel in the
variant's tree: the whole instance, or its -dkq_256 part where the recipe lists the local patch 0009; there the
other part of ncols1_2-ncols2_4 (-dkq_not256: the unit of its head size 128 kernel) is compiled too, and the rule
clears it and its PTX is the same. The commands are CMake's own (`ninja -t commands`), only turned from object to
PTX output. About two minutes on 2 cores."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit.build import units
from patchkit.recipe import load_recipe
from tests.integration.conftest import mma_instance

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: compiling CUDA needs the CUDA toolkit",
)

HEADER = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
ROW = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);"
COLUMNS = {"cleared": (16, 1), "read": (2, 4)}  # (ncols1, ncols2)


def _ptx_command(command: str, tree: Path, src: Path, out: Path) -> list[str]:
    """CMake's compile command of a unit, reading the sources under `src` and writing PTX to `out`."""
    args = shlex.split(command.replace(str(tree / "ggml"), str(src / "ggml")))
    keep: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-MD", "-MMD"):
            continue
        if a in ("-MT", "-MF", "-o"):
            skip = True
            continue
        if a.startswith("--generate-code="):
            a = "-arch=compute_89"
        keep.append("-ptx" if a == "-c" else a)
    return [*keep, "-o", str(out)]


def _compile(cmds: dict[str, list[str]], bdir: Path) -> None:
    procs = {
        k: subprocess.Popen(c, cwd=bdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for k, c in cmds.items()
    }
    for k, p in procs.items():
        out = p.communicate()[0].decode(errors="replace")
        assert p.returncode == 0, f"{k}: nvcc exited {p.returncode}: {out[-2000:]}"


def test_the_rule_clears_a_unit_whose_code_the_row_does_not_reach(cpu_build, work, tmp_path):
    recipe = load_recipe(None)
    tree = work.variants(recipe.name) / "+0001+0002"
    assert ROW in (tree / HEADER).read_text()
    unit = {k: mma_instance(tree, 256, 256, *c) for k, c in COLUMNS.items()}
    rest = mma_instance(tree, 128, 128, *COLUMNS["read"])  # the read unit itself where instances are not split
    if rest != unit["read"]:
        unit["rest"] = rest
    same = [k for k in unit if k != "read"]  # the units the row does not reach
    opts = build_mod.options_from(recipe, backend="cuda", archs=("89",))
    tc = build_mod.toolchain(opts)
    bdir = tmp_path / "build"
    build_mod.configure(tree, bdir, opts, tc, tmp_path / "configure.log")
    objects = build_mod.object_targets(bdir, list(unit.values()), tc.env)
    src = tmp_path / "src"
    shutil.copytree(tree / "ggml", src / "ggml")
    ptx: dict[str, dict[str, str]] = {}
    for edit in ("before", "after"):
        if edit == "after":
            h = src / HEADER
            h.write_text(h.read_text().replace(ROW, ROW.replace("128, 2, true", "128, 1, true"), 1))
        cmds = {}
        for k, u in unit.items():
            line = (
                subprocess.run(
                    ["ninja", "-C", str(bdir), "-t", "commands", objects[u]],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ, **tc.env},
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            cmds[k] = _ptx_command(line, tree, src, tmp_path / f"{k}-{edit}.ptx")
        _compile(cmds, bdir)
        ptx[edit] = {k: (tmp_path / f"{k}-{edit}.ptx").read_text() for k in unit}
    # the rule, as patchkit applies it to this edit
    old = (tree / HEADER).read_text()
    new = old.replace(ROW, ROW.replace("128, 2, true", "128, 1, true"), 1)
    inc = {HEADER: set(unit.values())}
    cleared = units.clear(recipe, [HEADER], lambda which, f: old if which == "old" else new, inc, tmp_path).units
    assert set(cleared) == {unit[k] for k in same}
    assert all(ptx["before"][k] == ptx["after"][k] for k in same), [
        k for k in same if ptx["before"][k] != ptx["after"][k]
    ]
    assert ptx["before"]["read"] != ptx["after"]["read"]
    assert re.search(r"\.entry\s", ptx["before"]["read"])  # real kernels, not an empty file
