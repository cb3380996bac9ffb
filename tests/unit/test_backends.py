"""The backend table (patchkit.backends): one entry per backend, and every place reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchkit import backends
from patchkit import build as build_mod
from patchkit.errors import BuildError, RecipeError
from patchkit.recipe import parse_recipe

ROOT = Path(__file__).resolve().parents[2] / "patchkit"
TOML = """
[base]
upstream = "ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f"
[base.sdist]
name = "llama-cpp-python"
version = "0.3.36"
sha256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
[build]
backend = "{backend}"
arch = ["89"]
"""


def _recipe(backend: str = "cuda"):
    return parse_recipe(TOML.format(backend=backend), Path("t.toml"))


def test_each_backend_is_one_entry():
    assert backends.NAMES == ("cuda", "cpu")  # the command line's choices, in this order
    assert {b.name: b.device for b in backends.BACKENDS.values()} == {"cuda": "CUDA0", "cpu": "CPU"}
    assert backends.CUDA.needs_gpu and backends.CUDA.archs and backends.CUDA.kernels
    assert not (backends.CPU.needs_gpu or backends.CPU.archs or backends.CPU.kernels)
    assert backends.CUDA.cmake_args == ("-DGGML_CUDA=ON",) and backends.CPU.cmake_args == ("-DGGML_CUDA=OFF",)
    assert (backends.CUDA.gpu_layers, backends.CPU.gpu_layers) == (99, 0)
    assert (backends.CUDA.wheel_gpu_layers, backends.CPU.wheel_gpu_layers) == (-1, 0)
    assert backends.CUDA.config(("89", "90")) == "cuda-89_90" and backends.CPU.config(()) == "cpu"


def test_an_unknown_backend_is_one_line():
    with pytest.raises(BuildError, match=r"^--backend: expected cuda or cpu, got 'rocm'$"):
        backends.get("rocm")
    assert backends.device("rocm") == "CPU" and backends.device(None) == "CPU"  # older results: as before
    with pytest.raises(RecipeError, match=r"build\.backend: expected 'cuda' or 'cpu', got 'rocm'"):
        _recipe("rocm")


def test_build_options_read_the_table():
    r = _recipe()
    cuda = build_mod.options_from(r, backend="cuda", archs=("89", "90"))
    cpu = build_mod.options_from(r, backend="cpu", archs=("89",))
    assert (cuda.config, cuda.archs) == ("cuda-89_90", ("89", "90"))
    assert (cpu.config, cpu.archs) == ("cpu", ())  # a backend without archs drops them
    assert build_mod.toolchain(cpu).cmake_args == ("-DGGML_CUDA=OFF",)
    with pytest.raises(BuildError, match="--backend: expected cuda or cpu, got 'metal'"):
        build_mod.options_from(r, backend="metal")


def _facts_outside(tree: ast.AST) -> list[tuple[int, str]]:
    """Backend facts written as literals: a comparison with "cuda"/"cpu", a device name, the CMake switch."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            if any(v in ("cuda", "cpu") for v in consts):
                out.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Constant) and node.value in ("CUDA0", "-DGGML_CUDA=ON", "-DGGML_CUDA=OFF", "99"):
            out.append((node.lineno, repr(node.value)))  # "99": an -ngl value
    return out


def test_no_backend_fact_outside_the_table():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "backends.py" and path.parent == ROOT:
            continue
        for line, what in _facts_outside(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
    assert not found, "\n".join(found)


def test_the_fact_finder_finds_them():
    tree = ast.parse('x = "CUDA0" if b.backend == "cuda" else "CPU"\nargs = ["-DGGML_CUDA=OFF"]')
    assert [w for _, w in _facts_outside(tree)] == ["b.backend == 'cuda'", "'CUDA0'", "'-DGGML_CUDA=OFF'"]
