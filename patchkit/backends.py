"""The backends patchkit builds and measures, one entry each (cibuildwheel's ALL_PLATFORM_MODULES is
the model): every fact that differs between the CPU and the CUDA backend is read from here.

To add a backend: one `Backend(...)` below and its entry in BACKENDS; `patchkit.build.toolchain` says
how its compiler is found where that needs more than its CMake flag. Imports nothing of patchkit but
its errors, so every stage (recipe, options, build, measure, executor, wheel) can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.errors import BuildError

# llama-completion / llama-perplexity -ngl: every layer on the device where the build has one (a CPU
# build has none to put them on, and takes the same argument)
ALL_LAYERS = 99


@dataclass(frozen=True, kw_only=True)
class Backend:
    name: str  # --backend, [build] backend, [profile.<name>]
    device: str  # test-backend-ops -b: the device its cases run on
    cmake_args: tuple[str, ...]  # the ggml switch of the backend
    needs_gpu: bool  # its binaries run on a GPU (an executor target needs one; fast defaults per GPU)
    archs: bool  # built for a list of GPU architectures (--arch); the build folder is named by them
    gpu_layers: int  # llama-bench -ngl of the decode step (llama-bench records it)
    wheel_gpu_layers: int  # llama-cpp-python n_gpu_layers of `patchkit wheel-check` (-1: all)
    kernels: bool  # its kernels are named and measured per launch (ncu: bench:path, bench:occupancy)
    check_dir: str  # the ggml source folder a compile check covers ("": every changed unit)

    def config(self, archs: tuple[str, ...]) -> str:
        """The build configuration's name (its build folder): "cpu", "cuda-89_90"."""
        return f"{self.name}-" + "_".join(archs) if self.archs else self.name


CUDA = Backend(
    name="cuda",
    device="CUDA0",
    cmake_args=("-DGGML_CUDA=ON",),
    needs_gpu=True,
    archs=True,
    gpu_layers=ALL_LAYERS,
    wheel_gpu_layers=-1,
    kernels=True,
    check_dir="ggml-cuda",
)
CPU = Backend(
    name="cpu",
    device="CPU",
    cmake_args=("-DGGML_CUDA=OFF",),
    needs_gpu=False,
    archs=False,
    gpu_layers=0,
    wheel_gpu_layers=0,
    kernels=False,
    check_dir="",
)

BACKENDS: dict[str, Backend] = {b.name: b for b in (CUDA, CPU)}
NAMES = tuple(BACKENDS)  # ("cuda", "cpu"): the command line's choices, in this order


def get(name: str, what: str = "--backend") -> Backend:
    """The backend of this name; `what` names where the name came from in the error."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise BuildError(f"{what}: expected {' or '.join(NAMES)}, got {name!r}") from None


def device(name: str | None) -> str:
    """The test-backend-ops device of a backend named in stored results: the CPU's for a name that is
    not a backend (results of older code)."""
    return BACKENDS.get(name or "", CPU).device


def device_needs_gpu(name: str | None) -> bool:
    """Whether a backend named in stored results runs on a GPU; True for a name that is not a backend
    (results of older code, which measured CUDA only)."""
    return BACKENDS.get(name or "", CUDA).needs_gpu
