"""The include graph of a tree and the Ninja object of a source: which units a changed file reaches (the compile
check for machines without a GPU, patchkit.build.unitcheck, and the sweep's check, patchkit.sweep.check)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from patchkit import proc
from patchkit.build.compiled import object_source

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def source_root(tree: Path) -> str:
    """Where ggml's sources lie in a tree: llama.cpp's layout `ggml/src`, ggml's own `src`."""
    return "ggml/src" if (tree / "ggml" / "src").is_dir() else "src"


def include_graph(tree: Path, scan_dirs: tuple[str, ...] = ("ggml/src",)) -> dict[str, set[str]]:
    """Every source and header under scan_dirs -> the tree paths its `#include "..."` lines name."""
    files: dict[str, set[str]] = {}
    for d in scan_dirs:
        for p in (tree / d).rglob("*"):
            if p.suffix in (".cu", ".cuh", ".cpp", ".c", ".h", ".hpp") and p.is_file():
                rel = str(p.relative_to(tree))
                files[rel] = {
                    os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                    for inc in _INCLUDE.findall(p.read_text(errors="replace"))
                }
    return files


def includers(
    tree: Path,
    changed: list[str],
    scan_dirs: tuple[str, ...] = ("ggml/src",),
    graph: dict[str, set[str]] | None = None,
) -> list[str]:
    """Translation units (.cu/.cpp/.c) under scan_dirs that are, or include (transitively), a changed file
    (`graph`: the tree's include_graph, when the caller has it already)."""
    files = include_graph(tree, scan_dirs) if graph is None else graph
    targets = set(changed)
    grew = True
    while grew:
        grew = False
        for f, deps in files.items():
            if f not in targets and deps & targets:
                targets.add(f)
                grew = True
    return sorted(f for f in targets if f.endswith((".cu", ".cpp", ".c")) and f in files)


def object_targets(bdir: Path, sources: list[str], env: dict[str, str]) -> dict[str, str]:
    """Map source paths (relative to the tree) to their Ninja object targets.

    CMake names an object <target dir>/CMakeFiles/<target>.dir/<source relative to target dir>.o.
    """
    out = proc.run(["ninja", "-C", str(bdir), "-t", "targets", "all"], echo=False, env=env).stdout
    by_source: dict[str, str] = {}
    for ln in out.splitlines():
        obj = ln.split(":", 1)[0]
        if (src := object_source(obj)) is not None:
            by_source.setdefault(src, obj)
    return {s: by_source[s] for s in sources if s in by_source}
