"""Which variants compile to the same code as base in one build configuration.

A variant whose patches change no file that any object of the build was compiled from (Ninja's own
dependency log: every source and header of every object) and no CMake file compiles to the same
objects as base; only its build-info string and links differ. Measuring it would measure base
again, so the pipeline does not, and says why (the seed's patches touch only CUDA sources, so on
the CPU backend nothing of theirs is compiled). Nothing is ever copied from base to such a variant.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchkit import proc, vcs

CMAKE_FILES = ("CMakeLists.txt", ".cmake")


def compiled_inputs(bdir: Path, tree: Path, targets: tuple[str, ...], env: dict[str, str] | None = None) -> set[str]:
    """Every file (relative to the source tree) that an object of `targets` in the build in `bdir` was
    compiled from, as Ninja's deps log records it (`ninja -t deps`); empty when that is not known for
    every object (then nothing can be concluded)."""
    out = proc.run(["ninja", "-C", str(bdir), "-t", "deps"], echo=False, env=env).stdout
    inputs = proc.run(["ninja", "-C", str(bdir), "-t", "inputs", *targets], echo=False, env=env, check=False)
    if not inputs.ok:
        return set()  # a Ninja without `-t inputs` (before 1.11)
    objects = {ln.strip() for ln in inputs.stdout.splitlines() if ln.strip().endswith((".o", ".obj"))}
    recorded = {ln.split(":")[0] for ln in out.splitlines() if ln and not ln.startswith(" ")}
    if not objects or not objects <= recorded:
        return set()  # an object without recorded dependencies: nothing can be concluded
    return parse_deps(out, bdir, tree)


def parse_deps(text: str, bdir: Path, tree: Path) -> set[str]:
    """The dependency paths of `ninja -t deps` output under `tree` (absolute, or relative to bdir)."""
    root = os.path.realpath(tree)
    files: set[str] = set()
    for line in text.splitlines():
        if not line.startswith(" ") or not line.strip():
            continue
        p = line.strip()
        full = os.path.realpath(p if os.path.isabs(p) else os.path.join(bdir, p))
        if full.startswith(root + os.sep):
            files.add(os.path.relpath(full, root))
    return files


def changed_files(repo_dir: Path, old: str, new: str) -> list[str]:
    """Files that differ between two commits."""
    return vcs.git(repo_dir, "diff", "--name-only", old, new, check=True).text.split()


def same_code_reason(changed: list[str], inputs: set[str], config: str) -> str:
    """Why a variant with these changed files compiles to base's code in this configuration, or ''
    when it does not (a compiled file or a CMake file changed, or nothing is known)."""
    if not changed or not inputs:
        return ""
    if any(f in inputs or f.endswith(CMAKE_FILES) for f in changed):
        return ""
    dirs = sorted({os.path.dirname(f) or "." for f in changed})
    only_cuda = all(f.startswith("ggml/src/ggml-cuda/") for f in changed)
    what = "touches only CUDA sources" if only_cuda else f"touches only files not compiled here ({', '.join(dirs)})"
    return f"no compiled change on {config}: the series {what}"
