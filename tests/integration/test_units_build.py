"""[[affects]] units in a real CMake/Ninja build folder (patchkit.build.units.prepare): after a row edit, Ninja
recompiles the units that read the changed rows and every other includer of the file, not the cleared
units, and the program is the one a clean build of the new tree makes. A small C project with a config
table like the FA MMA one (real git, cmake, ninja, cc)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.build import units
from patchkit.recipe import Affects, load_recipe
from tests.conftest import git

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake, ninja")

CFG = """#pragma once
#define CFG_CASE(n_, v_) if (n == n_) return v_;
static int cfg(const int n) {
    CFG_CASE(1, 10);
    CFG_CASE(2, 20);
    CFG_CASE(3, 30);
    return 0;
}
"""
UNIT = '#include "cfg.h"\nint get_{k}(void) {{ return cfg({k}); }}\n'
OTHER = '#include "cfg.h"\nint total(void) { return cfg(1) + cfg(2) + cfg(3); }\n'
MAIN = """#include <stdio.h>
int get_1(void); int get_2(void); int get_3(void); int total(void);
int main(void) { printf("%d %d %d %d\\n", get_1(), get_2(), get_3(), total()); return 0; }
"""
CMAKE = """cmake_minimum_required(VERSION 3.14)
project(t C)
add_executable(t main.c u_1.c u_2.c u_3.c other.c)
"""
RULE = Affects(file="cfg.h", macro="CFG_CASE", params="", units=r"u_(?P<k>\d+)\.c", uses="k == n")


def _ninja(bdir: Path) -> list[str]:
    """The objects Ninja compiled (its compile commands' -o)."""
    out = subprocess.run(["ninja", "-C", str(bdir), "-v"], check=True, capture_output=True, text=True).stdout
    objs = []
    for ln in out.splitlines():
        words = ln.split()
        if " -c " in ln and "-o" in words:
            objs.append(words[words.index("-o") + 1].split("/")[-1])
    return sorted(objs)


def _run(bdir: Path) -> str:
    return subprocess.run([str(bdir / "t")], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def project(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in {"cfg.h": CFG, "other.c": OTHER, "main.c": MAIN, "CMakeLists.txt": CMAKE}.items():
        (tree / name).write_text(text)
    for k in (1, 2, 3):
        (tree / f"u_{k}.c").write_text(UNIT.format(k=k))
    git(tree, "init", "-q")
    git(tree, "add", ".")
    git(tree, "commit", "-qm", "a")
    a = git(tree, "rev-parse", "HEAD")
    (tree / "cfg.h").write_text(CFG.replace("CFG_CASE(2, 20);", "CFG_CASE(2, 21);"))
    git(tree, "commit", "-qam", "b")
    b = git(tree, "rev-parse", "HEAD")
    git(tree, "checkout", "-q", "--detach", a)
    bdir = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(tree), "-B", str(bdir), "-G", "Ninja"], check=True, capture_output=True)
    assert len(_ninja(bdir)) == 5
    (bdir / units.STAMP).write_text(f'{{"head": "{a}"}}')
    return tree, bdir, a, b


def test_a_row_edit_recompiles_the_readers_only(project, tmp_path):
    tree, bdir, _, b = project
    recipe = dataclasses.replace(load_recipe(None), affects=(RULE,))
    prep = units.prepare(recipe, tree, bdir, b, None)
    assert prep is not None
    assert set(prep.cleared.units) == {"u_1.c", "u_3.c"}
    assert prep.cleared.covered == {"cfg.h": ["other.c", "u_2.c"]}
    git(tree, "checkout", "-q", "--detach", b)
    prep.apply(tree, bdir)
    assert _ninja(bdir) == ["other.c.o", "u_2.c.o"]
    assert _run(bdir) == "10 21 30 61"
    assert _ninja(bdir) == []  # and Ninja is content with the folder after it
    # the same program as a clean build of the new tree
    clean = tmp_path / "clean"
    subprocess.run(["cmake", "-S", str(tree), "-B", str(clean), "-G", "Ninja"], check=True, capture_output=True)
    _ninja(clean)
    assert _run(clean) == _run(bdir)


def test_nothing_is_prepared_when_the_last_build_did_not_finish_at_the_head(project):
    tree, bdir, a, b = project
    recipe = dataclasses.replace(load_recipe(None), affects=(RULE,))
    (bdir / units.STAMP).write_text('{"head": "0000000000000000000000000000000000000000"}')
    assert units.prepare(recipe, tree, bdir, b, None) is None
    (bdir / units.STAMP).unlink()
    assert units.prepare(recipe, tree, bdir, b, None) is None
    (bdir / units.STAMP).write_text(f'{{"head": "{a}"}}')
    assert (
        units.prepare(
            dataclasses.replace(recipe, affects=(dataclasses.replace(RULE, units="", uses=""),)), tree, bdir, b, None
        )
        is None
    )
    # without the rule's help Ninja recompiles every includer
    git(tree, "checkout", "-q", "--detach", b)
    assert _ninja(bdir) == ["other.c.o", "u_1.c.o", "u_2.c.o", "u_3.c.o"]
    assert _run(bdir) == "10 21 30 61"


def test_a_row_comment_ending_in_a_backslash_clears_nothing_and_the_program_is_the_clean_one(project, tmp_path, capsys):
    # issue 29: the comment splices the next row (3) into it: the text shows row 2 changed, the compiler
    # reads row 3 gone too (was: u_1.c and u_3.c cleared, the stale u_3.c.o linked: "10 21 30 61")
    tree, bdir, a, _ = project
    git(tree, "checkout", "-q", "--detach", a)
    (tree / "cfg.h").write_text(CFG.replace("CFG_CASE(2, 20);", "CFG_CASE(2, 21); // tuned \\"))
    git(tree, "commit", "-qam", "c")
    c = git(tree, "rev-parse", "HEAD")
    git(tree, "checkout", "-q", "--detach", a)
    recipe = dataclasses.replace(load_recipe(None), affects=(RULE,))
    assert units.prepare(recipe, tree, bdir, c, None) is None
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "every unit including cfg.h is compiled" in out[0] and "other changed rows" in out[0]
    assert not [p for p in bdir.iterdir() if p.name.startswith(".patchkit-rows-")]
    git(tree, "checkout", "-q", "--detach", c)
    assert _ninja(bdir) == ["other.c.o", "u_1.c.o", "u_2.c.o", "u_3.c.o"]
    assert _run(bdir) == "10 21 0 31"
