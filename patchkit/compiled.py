"""Which variants compile to the same code as base in one build configuration.

A variant whose patches change no file that any object of the build was compiled from (Ninja's own
dependency log: every source and header of every object) and no CMake file compiles to the same
objects as base; only its build-info string and links differ. Measuring it would measure base
again, so the pipeline does not, and says why (the seed's patches touch only CUDA sources, so on
the CPU backend nothing of theirs is compiled). Nothing is ever copied from base to such a variant.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from patchkit import proc, vcs

CMAKE_FILES = ("CMakeLists.txt", ".cmake")


def compiled_inputs(bdir: Path, tree: Path, targets: tuple[str, ...], env: dict[str, str] | None = None) -> set[str]:
    """Every file (relative to the source tree) that an object of `targets` in the build in `bdir` was
    compiled from, as Ninja's deps log records it (`ninja -t deps`); empty when that is not known for
    every object (then nothing can be concluded)."""
    deps = ninja_deps(bdir, tree, env)
    inputs = proc.run(["ninja", "-C", str(bdir), "-t", "inputs", *targets], echo=False, env=env, check=False)
    if not inputs.ok:
        return set()  # a Ninja without `-t inputs` (before 1.11)
    objects = {ln.strip() for ln in inputs.stdout.splitlines() if ln.strip().endswith((".o", ".obj"))}
    if not objects or not objects <= set(deps):
        return set()  # an object without recorded dependencies: nothing can be concluded
    return set().union(*deps.values())


def ninja_deps(bdir: Path, tree: Path, env: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Ninja's deps log of the build in `bdir`: object -> its dependencies under `tree` (relative to it)."""
    out = proc.run(["ninja", "-C", str(bdir), "-t", "deps"], echo=False, env=env).stdout
    return deps_by_object(out, bdir, tree)


def deps_by_object(text: str, bdir: Path, tree: Path) -> dict[str, set[str]]:
    """`ninja -t deps` output: object -> its dependency paths under `tree` (absolute, or relative to bdir)."""
    root = os.path.realpath(tree)
    out: dict[str, set[str]] = {}
    cur: set[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            cur = out.setdefault(line.split(":")[0], set())
            continue
        p = line.strip()
        if cur is None or not p:
            continue
        full = os.path.realpath(p if os.path.isabs(p) else os.path.join(bdir, p))
        if full.startswith(root + os.sep):
            cur.add(os.path.relpath(full, root))
    return out


_OBJECT = re.compile(r"(?:(.*)/)?CMakeFiles/[^/]+\.dir/(.+)\.o")


def object_source(obj: str) -> str | None:
    """The source (relative to the tree) of a CMake object target: CMake names an object
    <target dir>/CMakeFiles/<target>.dir/<source relative to the target dir>.o."""
    m = _OBJECT.fullmatch(obj)
    return os.path.normpath(os.path.join(m.group(1) or "", m.group(2))) if m else None


def changed_files(repo_dir: Path, old: str, new: str) -> list[str]:
    """Files that differ between two commits (a renamed file under both its names)."""
    return vcs.git(repo_dir, "diff", "--no-renames", "--name-only", old, new, check=True).text.split()


def added_or_removed(repo_dir: Path, old: str, new: str) -> list[str]:
    """Files one of two commits has and the other not (a rename is both): a change of the file list,
    which a CMake file(GLOB) may turn into objects added to or gone from the build."""
    return vcs.git(
        repo_dir, "diff", "--no-renames", "--name-only", "--diff-filter=AD", old, new, check=True
    ).text.split()


def same_code_reason(changed: list[str], inputs: set[str], config: str, layout: list[str] = ()) -> str:
    """Why a variant with these changed files compiles to base's code in this configuration, or ''
    when it does not (a compiled file or a CMake file changed, files were added or removed (`layout`,
    added_or_removed: base's deps log cannot say whether a GLOB compiles them), or nothing is known)."""
    if not changed or not inputs or layout:
        return ""
    if any(f in inputs or f.endswith(CMAKE_FILES) for f in changed):
        return ""
    dirs = sorted({os.path.dirname(f) or "." for f in changed})
    only_cuda = all(f.startswith("ggml/src/ggml-cuda/") for f in changed)
    what = "touches only CUDA sources" if only_cuda else f"touches only files not compiled here ({', '.join(dirs)})"
    return f"no compiled change on {config}: the series {what}"
