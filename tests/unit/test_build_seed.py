"""A build folder seeded from another (patchkit.build.seed), on a small real C project with real git, CMake
(Ninja generator, gcc's depfiles) and Ninja: the copy at another tree and folder path has nothing to build
while its tree is at the same commit, recompiles exactly the unit whose source (or header) a later commit
changes, and links a binary that differs; Ninja's command hash is the one its own log holds."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.build import seed
from tests.conftest import commit_files, git

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="needs cmake, ninja, cc"
)

CMAKE = """cmake_minimum_required(VERSION 3.16)
project(toy C)
include_directories(include)
add_executable(toy main.c a.c b.c)
"""
SOURCES = {
    "CMakeLists.txt": CMAKE,
    "include/toy.h": "int a(void);\nint b(void);\n#define TOY_B 2\n",
    "main.c": '#include <stdio.h>\n#include "toy.h"\nint main(void) { printf("%d\\n", a() + b()); return 0; }\n',
    "a.c": '#include "toy.h"\nint a(void) { return 1; }\n',
    "b.c": '#include "toy.h"\nint b(void) { return TOY_B; }\n',
}
_BUILT = re.compile(r"Building C object CMakeFiles/toy\.dir/(\S+)\.o")


def _run(*args: str | Path) -> str:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True).stdout


def _built(bdir: Path) -> list[str]:
    return sorted(_BUILT.findall(_run("ninja", "-C", bdir)))


@pytest.fixture
def built(tmp_path):
    """A repository of the toy project with a second commit that changes a.c; a worktree at the first commit
    built in src/build; a second worktree (elsewhere, another path length) at the first commit too."""
    repo = tmp_path / "repo"
    first = commit_files(repo, SOURCES, "one")
    commit_files(repo, {"a.c": '#include "toy.h"\nint a(void) { return 40; }\n'}, "two: a returns 40")
    src = tmp_path / "src"
    git(repo, "worktree", "add", "-q", "--detach", str(src / "tree"), first)
    _run("cmake", "-S", src / "tree", "-B", src / "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release")
    assert _built(src / "build") == ["a.c", "b.c", "main.c"]
    assert _run(src / "build" / "toy") == "3\n"
    mine = tmp_path / "each" / "variant-with-a-longer-name"
    git(repo, "worktree", "add", "-q", "--detach", str(mine / "tree"), first)
    return repo, src, mine


def _seed(src: Path, mine: Path, tmp_path: Path) -> dict:
    assert seed.copy_mtimes(src / "tree", mine / "tree") == len(SOURCES)
    git(mine / "tree", "update-index", "-q", "--refresh")
    return seed.seed_folder(src / "tree", src / "build", mine / "tree", mine / "build", None, tmp_path / "seed.log")


def test_murmur64a_is_ninjas_command_hash(built):
    _, src, _ = built
    log = (src / "build" / ".ninja_log").read_text().splitlines()
    hashes = {ln.split("\t")[3]: ln.split("\t")[4] for ln in log[1:]}
    out = subprocess.run(["ninja", "-C", src / "build", "-t", "commands", "toy"], capture_output=True, text=True)
    link = out.stdout.splitlines()[-1]
    assert hashes["toy"] == f"{seed.murmur64a(link.encode()):x}"
    assert seed.murmur64a(b"") != seed.murmur64a(b"\0")  # the tail is hashed


def test_a_seeded_folder_has_nothing_to_build_at_the_same_commit(built, tmp_path):
    _, src, mine = built
    facts = _seed(src, mine, tmp_path)
    assert facts["log_dropped"] == 0 and facts["deps_paths"] >= 4 and facts["files"] >= 1
    explain = subprocess.run(["ninja", "-C", mine / "build", "-n", "-d", "explain"], capture_output=True, text=True)
    assert "no work to do" in explain.stdout, explain.stdout + explain.stderr
    cache = (mine / "build" / "CMakeCache.txt").read_text()
    assert str(mine / "build") in cache and str(src / "build") not in cache
    deps = _run("ninja", "-C", mine / "build", "-t", "deps")
    assert str(mine / "tree" / "include" / "toy.h") in deps and str(src / "tree") not in deps
    assert (mine / "build" / seed.MARK).is_file()


def test_the_seeded_folder_recompiles_the_changed_unit_and_the_binary_differs(built, tmp_path):
    repo, src, mine = built
    _seed(src, mine, tmp_path)
    git(mine / "tree", "checkout", "-q", "--detach", "--force", git(repo, "rev-parse", "master"))
    assert _built(mine / "build") == ["a.c"]  # the changed unit, and not the others
    assert _run(mine / "build" / "toy") == "42\n" and _run(src / "build" / "toy") == "3\n"
    # a header changed after the seed: its includers, from the deps log the seed rewrote
    (mine / "tree" / "include" / "toy.h").write_text(SOURCES["include/toy.h"].replace("TOY_B 2", "TOY_B 5"))
    assert _built(mine / "build") == ["a.c", "b.c", "main.c"]
    assert _run(mine / "build" / "toy") == "45\n"
    assert _built(src / "build") == []  # the folder it was seeded from is untouched


def test_an_unknown_command_hash_is_dropped_so_ninja_rebuilds_that_output(built, tmp_path):
    _, src, mine = built
    log = src / "build" / ".ninja_log"
    lines = log.read_text().splitlines()
    lines = [ln if "b.c.o" not in ln else "\t".join([*ln.split("\t")[:4], "123abc"]) for ln in lines]
    log.write_text("\n".join(lines) + "\n")
    facts = _seed(src, mine, tmp_path)
    assert facts["log_dropped"] == 1
    assert _built(mine / "build") == ["b.c"]


def test_rewrite_text_moves_whole_paths_only():
    moves = {"/w/cpu/tree": "/w/cpu/each/v/tree", "/w/cpu/build": "/w/cpu/each/v/build"}
    text = "-I/w/cpu/tree/ggml /w/cpu/build; /w/cpu/tree2/x /w/cpu/builds"
    assert (
        seed.rewrite_text(text, moves) == "-I/w/cpu/each/v/tree/ggml /w/cpu/each/v/build; /w/cpu/tree2/x /w/cpu/builds"
    )
