"""The sweep's per-point link (patchkit.sweep.gpu.Gpu.link) on a real CMake + Ninja project.

A small C project stands in for llama.cpp: `row.h` is the config header, `a.c` the unit that uses the
row, `b.c` one that does not, and the executable is called test-backend-ops. The start variant's
build is the shared build folder; the point's `a.c` object is compiled in the sweep's own lane
(another tree, same options) and linked there. What must hold: the point's binary runs the point's
code, the shared build is the start's again afterwards (Ninja relinks it and compiles nothing), an
interrupted link is undone before the next use, and a lane built with other options is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit import build
from patchkit.errors import BuildError
from patchkit.sweep import gpu as gpu_mod
from patchkit.sweep.points import Point
from patchkit.sweep.spec import SweepError
from patchkit.sweep.store import Store

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="needs cmake, ninja, cc"
)

CMAKE = """cmake_minimum_required(VERSION 3.16)
project(mini C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_library(lib STATIC a.c b.c)
add_executable(test-backend-ops main.c)
target_link_libraries(test-backend-ops lib)
"""
SOURCES = {
    "a.c": '#include "row.h"\nint a(void) { return ROW; }\n',
    "b.c": '#include "other.h"\nint b(void) { return 2; }\n',
    "main.c": '#include <stdio.h>\nint a(void); int b(void);\nint main(void) { printf("%d\\n", a() + 10 * b()); }\n',
    "other.h": "/* not the row */\n",
    "CMakeLists.txt": CMAKE,
}
OBJ = "CMakeFiles/lib.dir/a.c.o"


def _tree(path: Path, row: int) -> Path:
    path.mkdir(parents=True)
    for name, text in SOURCES.items():
        (path / name).write_text(text)
    (path / "row.h").write_text(f"#define ROW {row}\n")
    return path


def _configure(tree: Path, bdir: Path, *extra: str) -> None:
    args = ["cmake", "-S", str(tree), "-B", str(bdir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", *extra]
    subprocess.run(args, check=True, capture_output=True)
    build.write_json(bdir / "patchkit-configure.json", args)


def _ninja(bdir: Path, *targets: str) -> str:
    return subprocess.run(["ninja", "-C", str(bdir), *targets], check=True, capture_output=True, text=True).stdout


def _runs(exe: Path) -> str:
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip()


def _setup(tmp_path: Path, *lane_extra: str):
    root = tmp_path / "builds" / "cpu"
    _configure(_tree(root / "tree", row=1), root / "build")
    _ninja(root / "build")  # the start variant, built
    store = Store(tmp_path / "sweep")
    lane = store.build_dir("90")
    _configure(_tree(store.tree, row=5), lane, *lane_extra)  # the point: ROW 5
    _ninja(lane, OBJ)
    dst = store.objects("p5") / OBJ
    dst.parent.mkdir(parents=True)
    shutil.copy2(lane / OBJ, dst)
    rec = {"name": "p5", "objects": {"files": {OBJ: "sha"}, "bdir": str(lane), "arch": "90"}}
    g = gpu_mod.Gpu.__new__(gpu_mod.Gpu)  # the link needs only these (no recipe, no GPU)
    g.store, g.root, g.start_key, g.checked_commands, g.seconds = store, root, "start-key", False, {}
    g.tc = build.Toolchain(cmake_args=())
    g.g = gpu_mod.GpuOptions(opts=build.BuildOptions(backend="cpu", archs=()))
    point = Point(name="p5", values={"ROW": 5}, row={}, reference=False, patch=b"x", key="k5")
    store.logs.mkdir(parents=True)
    return g, point, rec, root


def test_the_point_binary_runs_the_point_and_the_start_is_left_as_it_was(tmp_path):
    g, point, rec, root = _setup(tmp_path)
    start_obj = (root / "build" / OBJ).read_bytes()
    out = g.link(point, rec)
    assert _runs(out / "test-backend-ops") == "25"  # a() of the point, b() of the start's objects
    assert (root / "build" / OBJ).read_bytes() == start_obj and not g.marker.exists()
    log = _ninja(root / "build")
    assert "Building" not in log and "Linking" in log  # the start relinked, nothing compiled
    assert _runs(root / "build" / "bin" / "test-backend-ops") == "21"
    assert g.link(point, rec) == out and "link" in g.seconds  # a finished link is found by its manifest


def test_an_interrupted_link_is_undone_before_the_next_use(tmp_path):
    g, _, _, root = _setup(tmp_path)
    start_obj = (root / "build" / OBJ).read_bytes()
    saved = g.store.objects("_start")
    (saved / OBJ).parent.mkdir(parents=True)
    shutil.copy2(root / "build" / OBJ, saved / OBJ)
    linked = ["liblib.a", "bin/test-backend-ops"]
    build.write_json(g.marker, {"saved": str(saved), "objects": [OBJ], "linked": linked, "point": "p5"})
    st = (saved / OBJ).stat()
    shutil.copy2(g.store.objects("p5") / OBJ, root / "build" / OBJ)
    os.utime(root / "build" / OBJ, ns=(st.st_atime_ns, st.st_mtime_ns))
    for x in linked:
        (root / "build" / x).unlink()
    _ninja(root / "build")  # the point linked in the shared build, then killed before the restore
    assert _runs(root / "build" / "bin" / "test-backend-ops") == "25"
    g._restore()
    assert (root / "build" / OBJ).read_bytes() == start_obj and not g.marker.exists()
    _ninja(root / "build")
    assert _runs(root / "build" / "bin" / "test-backend-ops") == "21"


def test_a_lane_built_with_other_options_is_refused(tmp_path):
    g, point, rec, _ = _setup(tmp_path, "-DCMAKE_C_FLAGS=-DEXTRA=1")
    with pytest.raises(SweepError, match="compiled with other options"):
        g.link(point, rec)
    assert not g.marker.exists() and not g.store.bin_dir("p5").exists()


def test_a_link_that_would_compile_fails_the_point_and_leaves_the_start(tmp_path):
    g, point, rec, root = _setup(tmp_path)
    start_obj = (root / "build" / OBJ).read_bytes()
    (root / "tree" / "b.c").write_text('#include "other.h"\nint b(void) { return 3; }\n')  # not built
    with pytest.raises(BuildError, match="linking recompiled 1 objects"):
        g.link(point, rec)
    assert (root / "build" / OBJ).read_bytes() == start_obj and not g.marker.exists()
    assert not g.store.bin_dir("p5").exists()
