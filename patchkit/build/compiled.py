"""Which variants compile to the same code as base in one build configuration.

A variant whose patches change no file that any object of the build was compiled from (Ninja's own
dependency log: every source and header of every object) and no CMake file compiles to the same
objects as base; only its build-info string and links differ. Measuring it would measure base
again, so the pipeline does not, and says why (the seed's patches touch only CUDA sources, so on
the CPU backend nothing of theirs is compiled). Nothing is ever copied from base to such a variant.

Files that CMake writes into the build folder at configure time (`configure_file()`: ggml-version.h,
build-info.cpp) are compiled too, yet their sources are templates in the tree that no object depends on
(issue 29: a changed ggml-version.h.in was "no compiled change"). So the premise is proven twice:

* no changed file is one CMake reads when it configures (the regeneration rule of build.ninja lists every
  CMake file and template: `ninja -t query build.ninja`);
* every generated file an object was compiled from has, after the variant's build, the content it had
  after base's, once the tree's commit (GGML_COMMIT, LLAMA_COMMIT) and build number are set aside: these
  differ for every variant by design (the build-info string). A generated file gone or unreadable, or a
  deps log or regeneration rule that cannot be read, means: a compiled change.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from patchkit import proc, vcs
from patchkit.build.phases import Phases

CMAKE_FILES = ("CMakeLists.txt", ".cmake")


class Inputs(set):
    """The files (relative to the tree) the objects were compiled from, and CMake's configure inputs under
    the tree (templates, CMake files); `generated`: each compiled file under the build folder (relative
    to it) -> its digest after base's build (`generated_digest`); `seconds`: where reading them took its time,
    by part (compiled_inputs: Ninja's tools, the parse, CMake's inputs, the digests; empty when read back)."""

    def __init__(self, files: set[str], *, bdir: Path, tree: Path, generated: dict[str, str]) -> None:
        super().__init__(files)
        self.bdir, self.tree, self.generated = bdir, tree, generated
        self.seconds: dict[str, float] = {}

    def at(self, bdir: Path, tree: Path) -> Inputs:
        """The same inputs, their generated files read in another build of the same configuration (a variant's
        own folder: patchkit.build.build_variants with a pool)."""
        return Inputs(set(self), bdir=bdir, tree=tree, generated=self.generated)


def compiled_inputs(bdir: Path, tree: Path, targets: tuple[str, ...], env: dict[str, str] | None = None) -> set[str]:
    """Every file (relative to the source tree) that an object of `targets` in the build in `bdir` was
    compiled from, as Ninja's deps log records it (`ninja -t deps`), and every file of the tree CMake
    reads when it configures (an `Inputs`); empty when that is not known for every object (then nothing
    can be concluded)."""
    clock = Phases(digits=None)
    lap = clock.lap
    out = proc.run(["ninja", "-C", str(bdir), "-t", "deps"], echo=False, env=env, check=False)
    inputs = proc.run(["ninja", "-C", str(bdir), "-t", "inputs", *targets], echo=False, env=env, check=False)
    lap("ninja -t deps/inputs")
    if not inputs.ok or not out.ok:
        return set()  # a Ninja without `-t inputs` (before 1.11)
    deps = deps_by_object(out.stdout, bdir, tree)
    objects = {ln.strip() for ln in inputs.stdout.splitlines() if ln.strip().endswith((".o", ".obj"))}
    lap("parse")
    if not objects or not objects <= set(deps):
        return set()  # an object without recorded dependencies: nothing can be concluded
    configure = configure_inputs(bdir, tree, env)
    lap("configure inputs")
    if configure is None:
        return set()
    made = generated_inputs(out.stdout, bdir, tree)
    digests = generated_digests(sorted(made), bdir, tree)
    lap(f"digests of {len(digests)} generated files")
    if not all(digests.values()):
        return set()
    got = Inputs(set().union(*deps.values()) | configure, bdir=bdir, tree=tree, generated=digests)
    got.seconds = clock.phases
    return got


def configure_inputs(bdir: Path, tree: Path, env: dict[str, str] | None = None) -> set[str] | None:
    """The tree's files CMake reads when it configures (build.ninja's regeneration rule: CMake files and
    configure_file() templates), relative to the tree; None when the rule cannot be read."""
    out = proc.run(["ninja", "-C", str(bdir), "-t", "query", "build.ninja"], echo=False, env=env, check=False)
    if not out.ok or "input:" not in out.stdout:
        return None
    root = os.path.realpath(tree)
    real = _resolver(bdir)
    files = set()
    for line in out.stdout.split("outputs:")[0].splitlines():
        p = line.strip().lstrip("|").strip()
        full = real(p)
        if p and full.startswith(root + os.sep):
            files.add(os.path.relpath(full, root))
    return files


def _resolver(bdir: Path) -> Callable[[str], str]:
    """os.path.realpath of a path as a deps log or build.ninja names it (absolute, or relative to `bdir`),
    remembered for the one parse: a full CUDA build's `ninja -t deps` names about 100,000 paths, mostly the same
    few thousand headers, and realpath stats each part of each (tens of microseconds a line: seconds a parse)."""
    known: dict[str, str] = {}

    def real(p: str) -> str:
        full = known.get(p)
        if full is None:
            full = known[p] = os.path.realpath(p if os.path.isabs(p) else os.path.join(bdir, p))
        return full

    return real


def generated_inputs(deps_text: str, bdir: Path, tree: Path) -> set[str]:
    """The dependencies (`ninja -t deps` output) that lie in the build folder and not in the tree:
    what CMake or a custom command wrote there, relative to the build folder."""
    broot, troot = os.path.realpath(bdir), os.path.realpath(tree)
    real = _resolver(bdir)
    out = set()
    for line in deps_text.splitlines():
        if not line.startswith(" ") or not (p := line.strip()):
            continue
        full = real(p)
        if full.startswith(broot + os.sep) and not full.startswith(troot + os.sep):
            out.add(os.path.relpath(full, broot))
    return out


_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_BUILD_NUMBER = re.compile(r"(LLAMA_BUILD_NUMBER\s*=\s*)\d+")


def generated_digests(files: list[str], bdir: Path, tree: Path) -> dict[str, str]:
    """`generated_digest` of each file (relative to `bdir`), the tree's HEAD read once. With one git process per
    file, 29 files took 7.6 s on a 16-core H100 host while nvcc filled its cores (examples/h100-2026-12-06d);
    the git processes are the only part beyond reading a small file, though the cause is not isolated."""
    head = vcs.git(tree, "rev-parse", "HEAD").text.strip()
    return {f: generated_digest(bdir / f, tree, bdir, head=head) for f in files}


def generated_digest(path: Path, tree: Path, bdir: Path | None = None, *, head: str | None = None) -> str:
    """sha256 of a generated file with the tree's commit (any abbreviation of its HEAD), the build number
    and the paths of the tree and of the build folder `bdir` set aside; '' when the file cannot be read.
    The paths: a variant built in its own folders (`--build-pool`) has CMake's unity sources
    (src/CMakeFiles/llama.dir/Unity/unity_N_cxx.cxx: `#include "<tree>/src/llama-....cpp"`) with its own
    tree's path where base's have the shared tree's; what those include is among the inputs (checked as
    changed files), so the path alone is no change of code."""
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return ""
    for folder, name in ((tree, "<tree>"), (bdir, "<build>")):
        if folder is not None:  # the longer spelling first: a resolved path may extend the given one
            for spelled in sorted({str(folder), os.path.realpath(folder)}, key=len, reverse=True):
                text = text.replace(spelled.rstrip(os.sep) + os.sep, name + "/")
    if head is None:
        head = vcs.git(tree, "rev-parse", "HEAD").text.strip()
    text = _HEX.sub(lambda m: "<commit>" if head.startswith(m.group()) else m.group(), text)
    text = _BUILD_NUMBER.sub(r"\1<number>", text)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def ninja_deps(bdir: Path, tree: Path, env: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Ninja's deps log of the build in `bdir`: object -> its dependencies under `tree` (relative to it)."""
    out = proc.run(["ninja", "-C", str(bdir), "-t", "deps"], echo=False, env=env).stdout
    return deps_by_object(out, bdir, tree)


def deps_by_object(text: str, bdir: Path, tree: Path) -> dict[str, set[str]]:
    """`ninja -t deps` output: object -> its dependency paths under `tree` (absolute, or relative to bdir)."""
    root = os.path.realpath(tree)
    real = _resolver(bdir)
    under: dict[str, str | None] = {}  # resolved path -> relative to the tree (None: outside it)
    out: dict[str, set[str]] = {}
    cur: set[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            cur = out.setdefault(line.split(":")[0], set())
            continue
        p = line.strip()
        if cur is None or not p:
            continue
        if p not in under:
            full = real(p)
            under[p] = os.path.relpath(full, root) if full.startswith(root + os.sep) else None
        if (rel := under[p]) is not None:
            cur.add(rel)
    return out


_OBJECT = re.compile(r"(?:(.*)/)?CMakeFiles/[^/]+\.dir/(.+)\.o")


def object_source(obj: str) -> str | None:
    """The source (relative to the tree) of a CMake object target: CMake names an object
    <target dir>/CMakeFiles/<target>.dir/<source relative to the target dir>.o."""
    m = _OBJECT.fullmatch(obj)
    return os.path.normpath(os.path.join(m.group(1) or "", m.group(2))) if m else None


def generated_changed(inputs: Inputs) -> list[str]:
    """The generated compiled files whose content now (after a variant's build) is not base's."""
    now = generated_digests(list(inputs.generated), inputs.bdir, inputs.tree)
    return [f for f, d in inputs.generated.items() if now[f] != d]


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
    when it does not (a compiled file, a CMake file or a configure_file() template changed, a generated
    compiled file's content differs from base's (`Inputs`: called after the variant's build), files were
    added or removed (`layout`, added_or_removed: base's deps log cannot say whether a GLOB compiles
    them), or nothing is known)."""
    if not changed or not inputs or layout:
        return ""
    if any(f in inputs or f.endswith(CMAKE_FILES) for f in changed):
        return ""
    if isinstance(inputs, Inputs) and generated_changed(inputs):
        return ""
    dirs = sorted({os.path.dirname(f) or "." for f in changed})
    only_cuda = all(f.startswith("ggml/src/ggml-cuda/") for f in changed)
    what = "touches only CUDA sources" if only_cuda else f"touches only files not compiled here ({', '.join(dirs)})"
    return f"no compiled change on {config}: the series {what}"
