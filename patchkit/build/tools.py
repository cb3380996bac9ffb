"""The toolchain of a build: CMake and Ninja, and for CUDA nvcc and cuBLAS (the toolkit's, or PyPI's
nvidia-cublas wheel), as CMake arguments and environment (patchkit.build)."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from patchkit import backends, proc
from patchkit.errors import ToolNotFound


class BuildOptions(Protocol):
    """What the toolchain reads of patchkit.build.BuildOptions."""

    backend: str
    archs: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    cmake_args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _cublas_from_wheel() -> tuple[Path, Path] | None:
    """(include dir, lib dir) of PyPI's nvidia-cublas wheel, if installed in this Python."""
    for p in sys.path:
        for sub in ("nvidia/cu13", "nvidia/cublas", "nvidia/cu12"):
            inc = Path(p) / sub / "include"
            if (inc / "cublas_v2.h").is_file():
                lib = Path(p) / sub / "lib"
                if glob.glob(str(lib / "libcublas.so*")):
                    return inc, lib
    return None


def _nvcc(candidates: tuple[str | None, ...] | None = None) -> Path:
    if candidates is None:
        candidates = (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc")
    for cand in candidates:
        if cand and os.access(cand, os.X_OK):
            return Path(cand).resolve()
    raise ToolNotFound(
        "no CUDA toolkit: nvcc not found (PATH, CUDACXX, /usr/local/cuda); "
        "build for the CPU backend instead: patchkit build --backend cpu"
    )


def toolchain(opts: BuildOptions) -> Toolchain:
    for tool in ("cmake", "ninja"):
        proc.which(tool)
    be = backends.get(opts.backend)
    if not be.needs_gpu:
        return Toolchain(cmake_args=be.cmake_args)
    nvcc = _nvcc()
    root = nvcc.parent.parent
    args = [
        *be.cmake_args,
        f"-DCMAKE_CUDA_COMPILER={nvcc}",
        f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(opts.archs)}",
    ]
    inc_dirs = [root / "include", *root.glob("targets/*/include")]
    if any((d / "cublas_v2.h").is_file() for d in inc_dirs):
        return Toolchain(cmake_args=tuple(args))
    wheel = _cublas_from_wheel()
    if wheel is None:
        raise ToolNotFound(
            f"cuBLAS not found: no cublas_v2.h in the CUDA toolkit at {root} and no nvidia-cublas wheel in this "
            "Python; pip install nvidia-cublas, or build for the CPU backend instead: patchkit build --backend cpu"
        )
    inc, lib = wheel
    libs = {name: sorted(glob.glob(str(lib / f"lib{name}.so*"))) for name in ("cublas", "cublasLt")}
    for name, found in libs.items():
        if not found:
            raise ToolNotFound(f"{lib}: lib{name}.so not found in the nvidia-cublas wheel")
    notes = [f"cuBLAS from the nvidia-cublas wheel at {lib.parent}"]
    if not any(
        any(Path(d).glob("libcuda.so*"))
        for d in (
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            str(root / "lib64" / "stubs"),
            *map(str, root.glob("targets/*/lib/stubs")),
        )
    ):
        # ggml-cuda links CUDA::cuda_driver; without a driver or stub library only compiling works (--check)
        args.append("-DCUDA_cuda_driver_LIBRARY=/usr/lib/x86_64-linux-gnu/libcuda.so")
        notes.append("no libcuda.so (driver or stub): objects compile, binaries do not link")
    args += [
        f"-DCUDA_cublas_LIBRARY={libs['cublas'][0]}",
        f"-DCUDA_cublasLt_LIBRARY={libs['cublasLt'][0]}",
        f"-DCMAKE_CUDA_FLAGS=-I{inc}",
        f"-DCMAKE_CXX_FLAGS=-I{inc}",
        f"-DCMAKE_C_FLAGS=-I{inc}",
    ]
    return Toolchain(
        cmake_args=tuple(args),
        env={
            "LIBRARY_PATH": f"{lib}:{os.environ.get('LIBRARY_PATH', '')}",
            "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        },
        notes=tuple(notes),
    )
