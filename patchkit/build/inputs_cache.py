"""Base's compiled inputs (patchkit.build.compiled.compiled_inputs) kept in the build folder they were read from,
keyed by what they were read from, so that a run whose base is reused reads them back in milliseconds (issue 37).

compiled_inputs reads Ninja's deps log (`ninja -t deps`), the manifest (`-t inputs`, `-t query build.ninja`), the
generated files an object was compiled from and the tree's HEAD (generated_digest sets the commit aside); on a
CUDA build that took 6.5-8.3 s (H200, issue 37), on the build lane, before the next variant's build could start.
Kept in <build folder>/patchkit-same-code.json with the key: the build folder and tree, the targets, the tree's
HEAD, sha256 of .ninja_deps, CMakeCache.txt, every *.ninja of the folder and of CMakeFiles/, and of each generated
file read. Any of them different: computed again (and kept). The same key means the same bytes are read, so the
same inputs and the same same-code decisions; what is not in the key (the file system's symlinks under the paths,
Ninja's own version) is not expected to change between two runs on one build folder. Written atomically
(write_json) and only when the key before and after the reads agree: two patchkits that share the build root's
lock (readers of finished builds) may each write it, each with the key of what it read.

The build lane (patchkit.run.lanes) reads them when base is told as built, and keeps them for the next run after
its builds (the last variant built changed the deps log): on the CPU steps' thread, beside the measurements,
off the path to the kernel verdict."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from patchkit import vcs
from patchkit.build import compiled
from patchkit.build.phases import Phases
from patchkit.workspace import DamagedFile, read_json, write_json

CACHE = "patchkit-same-code.json"
VERSION = 2  # 2: generated files' digests set the tree's and the build folder's paths aside


def _sha(path: Path) -> str:
    """sha256 of a file's bytes; '' when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _head(tree: Path) -> str:
    r = vcs.git(tree, "rev-parse", "HEAD", check=False)
    return r.text.strip() if r.ok else ""


def source_key(bdir: Path, tree: Path, targets: tuple[str, ...], generated: list[str]) -> dict:
    """What compiled_inputs reads in `bdir` (each as a digest): equal keys, equal inputs."""
    manifests = sorted(p for d in (bdir, bdir / "CMakeFiles") for p in d.glob("*.ninja") if p.is_file())
    return {
        "version": VERSION,
        "bdir": str(bdir),
        "tree": str(tree),
        "targets": list(targets),
        "head": _head(tree),
        "ninja_deps": _sha(bdir / ".ninja_deps"),
        "cmake_cache": _sha(bdir / "CMakeCache.txt"),
        "manifests": {str(p.relative_to(bdir)): _sha(p) for p in manifests},
        "generated": {f: _sha(bdir / f) for f in sorted(generated)},
    }


def read_back(bdir: Path, tree: Path, targets: tuple[str, ...]) -> set[str] | None:
    """The inputs kept in `bdir` when what they were read from is unchanged (an empty set: kept as not known);
    None when there are none, or anything changed."""
    try:
        kept = read_json(bdir / CACHE)
    except (OSError, DamagedFile):
        return None
    if not isinstance(kept, dict) or not isinstance(kept.get("key"), dict):
        return None
    generated = kept["key"].get("generated")
    if not isinstance(generated, dict) or source_key(bdir, tree, targets, list(generated)) != kept["key"]:
        return None
    files, digests = kept.get("files"), kept.get("digests")
    if not isinstance(files, list) or not isinstance(digests, dict):
        return None
    return compiled.Inputs(set(files), bdir=bdir, tree=tree, generated=digests) if files else set()


def keep(
    bdir: Path, tree: Path, targets: tuple[str, ...], env: dict[str, str] | None = None, *, tries: int = 1
) -> set[str]:
    """compiled_inputs of `bdir`, written beside them with their key; not written when the folder changed while
    they were read (the key before and after differ: another writer, or Ninja's own `-t deps` recompacting a
    deps log with too many dead records), then read again, `tries` times in all."""
    for _ in range(tries):
        clock = Phases(digits=None)
        before = source_key(bdir, tree, targets, [])
        clock.lap("keys")
        inputs = compiled.compiled_inputs(bdir, tree, targets, env)
        clock.lap("inputs")  # by part in inputs.seconds
        generated = list(inputs.generated) if isinstance(inputs, compiled.Inputs) else []
        after = source_key(bdir, tree, targets, generated)
        clock.lap("keys")
        if isinstance(inputs, compiled.Inputs):
            inputs.seconds["keys"] = clock.phases["keys"]
        if {**after, "generated": {}} == before:
            files = sorted(inputs)
            digests = inputs.generated if isinstance(inputs, compiled.Inputs) else {}
            write_json(bdir / CACHE, {"key": after, "files": files, "digests": digests})
            break
    return inputs


def inputs(
    bdir: Path, tree: Path, targets: tuple[str, ...], env: dict[str, str] | None = None
) -> tuple[set[str], str, float]:
    """(base's compiled inputs, 'read back' or 'computed', seconds): read back when kept and unchanged, else
    computed and kept."""
    t0 = time.monotonic()
    got = read_back(bdir, tree, targets)
    how = "read back"
    if got is None:
        got, how = keep(bdir, tree, targets, env), "computed"
    return got, how, time.monotonic() - t0
