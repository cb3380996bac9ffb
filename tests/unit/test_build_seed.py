"""A build folder seeded from another (patchkit.build.seed), on a small real C project with real git, CMake
(Ninja generator, gcc's depfiles) and Ninja: the copy at another tree and folder path has nothing to build
while its tree is at the same commit, recompiles exactly the unit whose source (or header) a later commit
changes, and links a binary that differs; Ninja's command hash is the one its own log holds.

Each runs with the system's Ninja (1.11 here: build log v5, MurmurHash64A) and with Ninja 1.13 (log v7,
rapidhash): $PATCHKIT_NINJA113 names its binary, else the one in $PATCHKIT_TEST_WORK/ninja-1.13, which
`pip download ninja==1.13.*` (PyPI's manylinux wheel) puts there once; skipped where it cannot be had."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchkit.build import ninja_hash, seed
from tests.conftest import commit_files, git

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="needs cmake, ninja, cc"
)
WORK = Path(os.environ.get("PATCHKIT_TEST_WORK", Path.home() / ".cache" / "patchkit-test"))


def _ninja113() -> Path | None:
    """Ninja 1.13's binary: $PATCHKIT_NINJA113, or the test work folder's copy (downloaded once by pip)."""
    if os.environ.get("PATCHKIT_NINJA113"):
        return Path(os.environ["PATCHKIT_NINJA113"])
    home = WORK / "ninja-1.13"
    binary = home / "bin" / "ninja"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist's workers: one downloads
        if not binary.is_file():
            argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
            got = subprocess.run([*argv, "-d", str(home), "ninja==1.13.*"], capture_output=True, text=True)
            wheels = sorted(home.glob("ninja-1.13.*.whl"))
            if got.returncode or not wheels:
                return None
            with zipfile.ZipFile(wheels[-1]) as whl:
                name = next(n for n in whl.namelist() if n.endswith("/scripts/ninja"))
                binary.parent.mkdir(exist_ok=True)
                (home / "bin" / "ninja.part").write_bytes(whl.read(name))
            (home / "bin" / "ninja.part").chmod(0o755)
            (home / "bin" / "ninja.part").rename(binary)
    return binary


@pytest.fixture(params=["system", "1.13"], scope="module")
def ninja(request) -> str:
    """The Ninja binary a test builds with (the seed's `ninja -t compdb` finds it first on PATH)."""
    if request.param == "system":
        return shutil.which("ninja")
    binary = _ninja113()
    if binary is None or not binary.is_file():
        pytest.skip("Ninja 1.13 not had: no $PATCHKIT_NINJA113 and `pip download ninja==1.13.*` failed")
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    assert out.startswith("1.13"), out
    return str(binary)


def _env(ninja: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(ninja).parent}{os.pathsep}{os.environ['PATH']}"}


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


def _built(ninja: str, bdir: Path) -> list[str]:
    return sorted(_BUILT.findall(_run(ninja, "-C", bdir)))


@pytest.fixture
def built(tmp_path, ninja):
    """A repository of the toy project with a second commit that changes a.c; a worktree at the first commit
    built in src/build by `ninja`; a second worktree (elsewhere, another path length) at the first commit."""
    repo = tmp_path / "repo"
    first = commit_files(repo, SOURCES, "one")
    commit_files(repo, {"a.c": '#include "toy.h"\nint a(void) { return 40; }\n'}, "two: a returns 40")
    src = tmp_path / "src"
    git(repo, "worktree", "add", "-q", "--detach", str(src / "tree"), first)
    cmake = ["cmake", "-S", src / "tree", "-B", src / "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
    _run(*cmake, f"-DCMAKE_MAKE_PROGRAM={ninja}")
    assert _built(ninja, src / "build") == ["a.c", "b.c", "main.c"]
    assert _run(src / "build" / "toy") == "3\n"
    mine = tmp_path / "each" / "variant-with-a-longer-name"
    git(repo, "worktree", "add", "-q", "--detach", str(mine / "tree"), first)
    return repo, src, mine


def _seed(src: Path, mine: Path, tmp_path: Path, ninja: str) -> dict:
    assert seed.copy_mtimes(src / "tree", mine / "tree") == len(SOURCES)
    git(mine / "tree", "update-index", "-q", "--refresh")
    log = tmp_path / "seed.log"
    return seed.seed_folder(src / "tree", src / "build", mine / "tree", mine / "build", _env(ninja), log)


def test_every_command_hash_of_the_log_is_ninjas(built, ninja):
    _, src, _ = built
    log = (src / "build" / ".ninja_log").read_text().splitlines()
    version = ninja_hash.log_version(log[0])
    assert version in ninja_hash.HASHES and (version == 7) == _run(ninja, "--version").startswith("1.13")
    assert len(log) == 5  # the three objects and the binary
    for out, held in (ln.split("\t")[3:5] for ln in log[1:]):
        command = _run(ninja, "-C", src / "build", "-t", "commands", "-s", out).splitlines()[-1]
        assert ninja_hash.command_hash(version, command) == held, out


def test_hashes_of_every_length_and_a_response_file_are_ninjas(tmp_path, ninja):
    """A hand-written build.ninja: commands of 1 to 202 bytes (every branch of either hash) and an edge with
    a response file (Ninja hashes the command, ";rspfile=" and the file's content)."""
    lines = ["rule r", "  command = $cmd", "rule rsp", "  command = $cmd", "  rspfile = $out.rsp"]
    lines += ["  rspfile_content = $text", "build rsp.out: rsp", "  cmd = : rsp", "  text = a b c"]
    cmds = {"o-true": "true", **{f"o{k}": ":" + (" " + "x" * k if k else "") for k in range(201)}}
    for out, cmd in cmds.items():
        lines += [f"build {out}: r", f"  cmd = {cmd}"]
    (tmp_path / "build.ninja").write_text("\n".join(lines) + "\n")
    _run(ninja, "-C", tmp_path)
    log = (tmp_path / ".ninja_log").read_text().splitlines()
    version = ninja_hash.log_version(log[0])
    held = {ln.split("\t")[3]: ln.split("\t")[4] for ln in log[1:]}
    assert len(held) == len(cmds) + 1
    assert {out: ninja_hash.command_hash(version, cmd) for out, cmd in cmds.items()} == {o: held[o] for o in cmds}
    assert held["rsp.out"] == ninja_hash.command_hash(version, ": rsp", "a b c")
    assert held["rsp.out"] != ninja_hash.command_hash(version, ": rsp")


def test_a_seeded_folder_has_nothing_to_build_at_the_same_commit(built, tmp_path, ninja):
    _, src, mine = built
    facts = _seed(src, mine, tmp_path, ninja)
    assert facts["log_dropped"] == 0 and facts["deps_paths"] >= 4 and facts["files"] >= 1
    explain = subprocess.run([ninja, "-C", mine / "build", "-n", "-d", "explain"], capture_output=True, text=True)
    assert "no work to do" in explain.stdout, explain.stdout + explain.stderr
    cache = (mine / "build" / "CMakeCache.txt").read_text()
    assert str(mine / "build") in cache and str(src / "build") not in cache
    deps = _run(ninja, "-C", mine / "build", "-t", "deps")
    assert str(mine / "tree" / "include" / "toy.h") in deps and str(src / "tree") not in deps
    assert (mine / "build" / seed.MARK).is_file()


def test_the_seeded_folder_recompiles_the_changed_unit_and_the_binary_differs(built, tmp_path, ninja):
    repo, src, mine = built
    _seed(src, mine, tmp_path, ninja)
    git(mine / "tree", "checkout", "-q", "--detach", "--force", git(repo, "rev-parse", "master"))
    assert _built(ninja, mine / "build") == ["a.c"]  # the changed unit, and not the others
    assert _run(mine / "build" / "toy") == "42\n" and _run(src / "build" / "toy") == "3\n"
    # a header changed after the seed: its includers, from the deps log the seed rewrote
    (mine / "tree" / "include" / "toy.h").write_text(SOURCES["include/toy.h"].replace("TOY_B 2", "TOY_B 5"))
    assert _built(ninja, mine / "build") == ["a.c", "b.c", "main.c"]
    assert _run(mine / "build" / "toy") == "45\n"
    assert _built(ninja, src / "build") == []  # the folder it was seeded from is untouched


def test_an_unknown_command_hash_is_dropped_so_ninja_rebuilds_that_output(built, tmp_path, ninja):
    _, src, mine = built
    log = src / "build" / ".ninja_log"
    lines = log.read_text().splitlines()
    lines = [ln if "b.c.o" not in ln else "\t".join([*ln.split("\t")[:4], "123abc"]) for ln in lines]
    log.write_text("\n".join(lines) + "\n")
    facts = _seed(src, mine, tmp_path, ninja)
    assert facts["log_dropped"] == 1
    assert _built(ninja, mine / "build") == ["b.c"]


def test_a_log_of_an_unknown_version_is_said_and_everything_rebuilds(built, tmp_path, ninja, capsys):
    _, src, mine = built
    log = src / "build" / ".ninja_log"
    log.write_text(log.read_text().replace("# ninja log v", "# ninja log v9", 1))
    facts = _seed(src, mine, tmp_path, ninja)
    assert "not understood" in facts["log_not_understood"] and facts["log_kept"] == 0
    assert facts["log_not_understood"] in (tmp_path / "seed.log").read_text()
    assert "build log not understood" in capsys.readouterr().out
    assert not (mine / "build" / ".ninja_log").exists()
    assert _built(ninja, mine / "build") == ["a.c", "b.c", "main.c"]


def test_rewrite_text_moves_whole_paths_only():
    moves = {"/w/cpu/tree": "/w/cpu/each/v/tree", "/w/cpu/build": "/w/cpu/each/v/build"}
    text = "-I/w/cpu/tree/ggml /w/cpu/build; /w/cpu/tree2/x /w/cpu/builds"
    assert (
        seed.rewrite_text(text, moves) == "-I/w/cpu/each/v/tree/ggml /w/cpu/each/v/build; /w/cpu/tree2/x /w/cpu/builds"
    )
