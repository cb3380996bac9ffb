"""patchkit.parsers.compiler on real build output: the H200 run's check logs, and gcc, nvcc and CMake
run here on sources with an error."""

from __future__ import annotations

import shutil

import pytest

from patchkit import proc
from patchkit.parsers import first_compiler_error, read_log

from .conftest import RAW

C_LOCALE = {"LC_ALL": "C"}  # gcc quotes names with ASCII quotes


def _output(tmp_path, argv: list) -> str:
    done = proc.run(argv, log=tmp_path / "build.log", cwd=tmp_path, env=C_LOCALE, check=False)
    assert done.returncode not in (0, None)
    return done.stdout


@pytest.mark.parametrize("name", sorted(p.name for p in RAW.glob("check-*.log")))
def test_h200_check_logs_have_no_compiler_error(name):
    # check-cuda-89-+0001+0002.log re-ran CMake, whose git call printed "error: Could not read <sha>":
    # not a compiler error (no file:line)
    text = read_log(RAW / name)
    assert first_compiler_error(text) is None


def test_gcc_error(tmp_path):
    (tmp_path / "bad.cpp").write_text("int f() {\n    return foo;\n}\n")
    out = _output(tmp_path, ["g++", "-c", "bad.cpp", "-o", "bad.o"])
    assert first_compiler_error(out) == "bad.cpp:2: 'foo' was not declared in this scope"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_static_assert(tmp_path):
    src = '__global__ void k() {\n    static_assert(sizeof(int) == 3, "bad loop size");\n}\n'
    (tmp_path / "bad.cu").write_text(src)
    out = _output(tmp_path, ["nvcc", "-c", "bad.cu", "-o", "bad.o"])
    assert first_compiler_error(out) == 'bad.cu:2: static assertion failed with "bad loop size"'


def test_cmake_error(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(x NONE)\nfind_package(NoSuchThing REQUIRED)\n"
    )
    out = _output(tmp_path, ["cmake", "-S", "src", "-B", "build"])
    assert first_compiler_error(out) == (
        'CMakeLists.txt:3: CMake Error: By not providing "FindNoSuchThing.cmake" in CMAKE_MODULE_PATH this project'
    )


def test_first_error_wins_and_clean_build_has_none(tmp_path):
    (tmp_path / "two.cpp").write_text("int f() { return foo; }\nint g() { return bar; }\n")
    out = _output(tmp_path, ["g++", "-c", "two.cpp", "-o", "two.o"])
    assert "bar" in out and first_compiler_error(out) == "two.cpp:1: 'foo' was not declared in this scope"
    (tmp_path / "ok.cpp").write_text("int f() { return 1; }\n")
    done = proc.run(["g++", "-c", "ok.cpp", "-o", "ok.o"], log=tmp_path / "ok.log", cwd=tmp_path, check=False)
    assert done.returncode == 0 and first_compiler_error(done.stdout) is None
