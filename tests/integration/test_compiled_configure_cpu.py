"""The "compiles to base's code" check (patchkit.build.compiled) and the files CMake's configure_file() writes
into the build folder (issue 29): on the real llama.cpp base, configured for the CPU and built for the
ggml-base library (real cmake, Ninja, cc), a variant that changes the template ggml/src/ggml-version.h.in
is a compiled change (was: "no compiled change on cpu"), while a variant that changes only README.md
still compiles to base's code, though its generated ggml-version.h holds another commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.build import compiled
from tests.conftest import git

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("c++")), reason="needs cmake, ninja, c++"
)
TEMPLATE = "ggml/src/ggml-version.h.in"


def _build(tree: Path, bdir: Path, head: str) -> None:
    """What patchkit's build does for a variant: check out, configure, build (here: ggml-base only)."""
    git(tree, "checkout", "-q", "--detach", head)
    cfg = ["cmake", "-S", str(tree), "-B", str(bdir), "-G", "Ninja", "-DGGML_CUDA=OFF", "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run(["nice", "-n", "10", *cfg], check=True, capture_output=True)
    subprocess.run(
        ["nice", "-n", "10", "ninja", "-C", str(bdir), "-j", "2", "ggml-base"], check=True, capture_output=True
    )


def test_a_changed_configure_template_is_a_compiled_change(work, base, tmp_path):
    tree, bdir = tmp_path / "tree", tmp_path / "build"
    tree.mkdir()
    archive = subprocess.run(["git", f"--git-dir={work.repo}", "archive", base.commit], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "base")
    b0 = git(tree, "rev-parse", "HEAD")
    (tree / "README.md").write_text((tree / "README.md").read_text() + "\nA note.\n")
    git(tree, "commit", "-qam", "readme")
    readme = git(tree, "rev-parse", "HEAD")
    git(tree, "checkout", "-q", "--detach", b0)
    (tree / TEMPLATE).write_text((tree / TEMPLATE).read_text() + "#define GGML_PATCHED 1\n")
    git(tree, "commit", "-qam", "template")
    templ = git(tree, "rev-parse", "HEAD")

    _build(tree, bdir, b0)
    inputs = compiled.compiled_inputs(bdir, tree, ("ggml-base",))
    assert isinstance(inputs, compiled.Inputs) and "ggml/src/ggml.c" in inputs
    assert TEMPLATE in inputs and "ggml/src/ggml-version.h" in inputs.generated  # read by configure, compiled

    _build(tree, bdir, readme)
    assert compiled.generated_changed(inputs) == []  # its GGML_COMMIT differs: set aside
    why = compiled.same_code_reason(compiled.changed_files(tree, b0, readme), inputs, "cpu")
    assert why.startswith("no compiled change on cpu")

    _build(tree, bdir, templ)
    changed = compiled.changed_files(tree, b0, templ)
    assert changed == [TEMPLATE]
    assert compiled.same_code_reason(changed, inputs, "cpu") == ""
    assert compiled.generated_changed(inputs) == ["ggml/src/ggml-version.h"]
    # the content alone decides too: a template that no configure input names
    bare = compiled.Inputs(set(inputs) - {TEMPLATE}, bdir=bdir, tree=tree, generated=inputs.generated)
    assert compiled.same_code_reason(changed, bare, "cpu") == ""
