"""The merge check: several runs are one comparison only if base, patches and build options agree."""

from __future__ import annotations

from typing import Any

from patchkit.report.runview import RunView
from patchkit.results.data.build import BuildData

ARCH_FLAG = "CMAKE_CUDA_ARCHITECTURES"


def patch_shas(run: RunView) -> dict[str, str]:
    """Patch file -> sha256, from recipe_info, then the variants, then env.json."""
    out: dict[str, str] = {}
    for p in (run.data.get("recipe_info") or {}).get("patches") or []:
        if p.get("sha256"):
            out[str(p.get("file") or p.get("id"))] = p["sha256"]
    for v in run.data.get("variants") or []:
        for p in v.get("patches") or []:
            if p.get("sha256"):
                out.setdefault(str(p.get("file") or p.get("id")), p["sha256"])
    for f, sha in (run.env.get("patches") or {}).items():
        out.setdefault(str(f), sha)
    return out


def _option(flag: Any) -> bool:
    """A build option to compare: not the CUDA arch, and not a tool's location on this machine
    (-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc, -DCUDA_cuda_driver_LIBRARY=/usr/lib/...)."""
    s = str(flag)
    return ARCH_FLAG not in s and not s.partition("=")[2].startswith("/")


def build_options(run: RunView) -> set[str]:
    """The build options of a run as comparable strings (CUDA arch and tool locations left out)."""
    out = {f"cmake flag {x}" for x in run.env.get("cmake_flags") or [] if _option(x)}
    for st in run.steps("build:"):
        opts = BuildData.from_step(st, run.where).options
        for k, v in sorted(opts.to_dict().items() if opts else []):
            if k in ("archs", "arch", "jobs"):
                continue
            vals = v if isinstance(v, list) else [v]
            out |= {f"{k} {x}" for x in vals if _option(x)}
    return out


def base_commit(run: RunView) -> str:
    return str((run.data.get("base") or {}).get("commit") or run.env.get("base") or "")


def merge_problems(runs: list[RunView]) -> list[str]:
    """Why these runs cannot be compared in one report ([] if they can)."""
    if len(runs) < 2:
        return []
    problems = []
    bases = {r.gpu: base_commit(r) for r in runs}
    if len(set(bases.values())) > 1:
        problems.append(
            "base commits differ (" + ", ".join(f"{g}: {c[:12] or 'unknown'}" for g, c in bases.items()) + ")"
        )
    shas = {r.gpu: patch_shas(r) for r in runs}
    files = sorted({f for s in shas.values() for f in s})
    differ = [f for f in files if len({s.get(f) for s in shas.values()}) > 1]
    if differ:
        problems.append("patch sha256s differ (" + ", ".join(differ) + ")")
    opts = {r.gpu: build_options(r) for r in runs}
    common = set.intersection(*opts.values())
    if any(o != common for o in opts.values()):
        problems.append(
            "build options other than the CUDA arch differ ("
            + "; ".join(f"{g}: {', '.join(sorted(o - common)) or 'nothing else'}" for g, o in opts.items())
            + ")"
        )
    return problems
