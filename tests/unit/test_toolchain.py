"""What patchkit says when the CUDA toolkit or cuBLAS is missing: one line naming the cause and the way out."""

import sys

import pytest

from patchkit import build
from patchkit.errors import ToolNotFound

OPTS = build.BuildOptions(backend="cuda", archs=("89",))


def _fake_toolkit(tmp_path):
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    (tmp_path / "cuda" / "include").mkdir()
    return nvcc


def test_no_cublas_says_how_to_get_it_or_build_for_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDACXX", str(_fake_toolkit(tmp_path)))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # no nvidia-cublas wheel on this path
    with pytest.raises(ToolNotFound) as e:
        build.toolchain(OPTS)
    msg = str(e.value)
    assert "cuBLAS not found" in msg and "pip install nvidia-cublas" in msg and "--backend cpu" in msg
    assert "\n" not in msg


def test_cublas_from_the_wheel_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDACXX", str(_fake_toolkit(tmp_path)))
    site = tmp_path / "site"
    (site / "nvidia" / "cu13" / "include").mkdir(parents=True)
    (site / "nvidia" / "cu13" / "include" / "cublas_v2.h").write_text("")
    (site / "nvidia" / "cu13" / "lib").mkdir()
    for lib in ("libcublas.so.13", "libcublasLt.so.13"):
        (site / "nvidia" / "cu13" / "lib" / lib).write_text("")
    monkeypatch.setattr(sys, "path", [str(site)])
    tc = build.toolchain(OPTS)
    assert f"-DCUDA_cublas_LIBRARY={site}/nvidia/cu13/lib/libcublas.so.13" in tc.cmake_args
    assert f"-DCMAKE_CUDA_FLAGS=-I{site}/nvidia/cu13/include" in tc.cmake_args
    assert "-DCMAKE_CUDA_ARCHITECTURES=89" in tc.cmake_args


def test_no_nvcc_says_build_for_cpu(tmp_path):
    with pytest.raises(ToolNotFound, match=r"no CUDA toolkit: nvcc not found .*--backend cpu"):
        build._nvcc((None, str(tmp_path / "nvcc")))


def test_arch_values_are_checked():
    from patchkit.errors import BuildError
    from patchkit.recipe import load_recipe

    r = load_recipe("default")
    assert build.options_from(r, archs=("89;90",)).archs == ("89", "90")
    assert build.options_from(r, archs=("native",)).config == "cuda-native"
    with pytest.raises(BuildError, match="'sm89' is not a CUDA architecture"):
        build.options_from(r, archs=("sm89",))
