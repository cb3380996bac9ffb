"""Hardware and software: each run's env.json fingerprint, base commit and patch sha256s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from patchkit import backends
from patchkit.parsers.devices import cpu_features
from patchkit.report.evidence import Evidence, Hardware
from patchkit.report.fmt import DASH, Block, bullets, code, details, portable_args, table, text
from patchkit.report.merge import patch_shas
from patchkit.report.prose import related
from patchkit.report.runview import RunView
from patchkit.results import timeline

GPU_TOOLKIT_KEYS = ("cuda",)  # env.json keys of a GPU toolkit (measure/env.py): not shown for a CPU build
BASE_KEYS = ("key", "ref", "commit", "route", "upstream", "upstream_verified", "sdist_file", "sdist_sha256")
# "provenance" (what a git-route base is, in words: patchkit.source) only where the run recorded one


def _cpu_run_env(run: RunView) -> dict[str, Any] | None:
    """The env.json of a run: for a CPU build without the CUDA toolkit's version (it was not used) and with
    the CPU features llama.cpp's system_info printed (a numerics log), where a log has it."""
    env = run.env or None
    if env is None or backends.device_needs_gpu(run.data.get("backend")):
        return env
    env = {k: v for k, v in env.items() if k not in GPU_TOOLKIT_KEYS}
    for log in sorted(run.bundle.raw.glob("gen-*.log")) if run.bundle.raw.is_dir() else []:
        feats = cpu_features(log.read_text(encoding="utf-8", errors="replace"))
        if feats:
            return {**env, "cpu_features": {"features": list(feats), "log": f"raw/{log.name}"}}
    return env


def evidence(run: RunView) -> Hardware:
    b = run.data.get("base") or {}
    return Hardware(
        gpu=run.gpu,
        run_id=run.run_id,
        created=run.data.get("created"),
        recipe=run.data.get("recipe"),
        env=_cpu_run_env(run),
        env_missing=not (run.bundle.path / "env.json").is_file(),
        base={k: b.get(k) for k in BASE_KEYS} | ({"provenance": b["provenance"]} if b.get("provenance") else {}),
        patches=patch_shas(run),
        timeline=timeline.summary(run.data) or None,
    )


def _get(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _unit(x: Any, unit: str) -> str | None:
    return None if x in (None, "", 0) else f"{x} {unit}"


def _mem_clock(e: dict) -> str | None:
    if not _get(e, "gpu", "mem_clock_mhz"):
        return None
    return f"{_get(e, 'gpu', 'mem_clock_mhz')} MHz / {_get(e, 'gpu', 'bus_width_bits')} bit"


def _compilers(e: dict) -> str | None:
    c = _get(e, "compiler") or {}
    return " / ".join(str(v) for v in (c.get("c"), c.get("cxx")) if v) or None


def _os(e: dict) -> Any:
    if isinstance(e.get("os"), dict):
        return " ".join(str(e["os"][k]) for k in ("system", "release", "machine") if e["os"].get(k))
    return e.get("os")


def _isa(e: dict) -> str | None:
    """A CPU build's instruction set: its flags, -march=native as resolved, the extensions (env.build_isa)."""
    isa = e.get("cpu_isa")
    if not isinstance(isa, dict):
        return None
    flags = code(str(isa.get("flags") or ""))
    march = f" ({isa['march']} on this machine)" if isa.get("march") else ""
    return f"{flags}{march}: {', '.join(isa.get('extensions') or []) or 'no extension flag'}"


def _features(e: dict) -> str | None:
    f = e.get("cpu_features")
    return f"{', '.join(f['features'])} (`{f['log']}`)" if isinstance(f, dict) and f.get("features") else None


def _cpu(e: dict) -> str | None:
    return ", ".join(x for x in (_get(e, "cpu", "model"), _unit(_get(e, "cpu", "cores"), "cores")) if x) or None


HW_FIELDS: list[tuple[str, Callable[[dict], Any]]] = [
    ("GPU", lambda e: _get(e, "gpu", "name")),
    ("machine", lambda e: e.get("derived")),  # an import without --env: what its logs named
    ("compute capability", lambda e: _get(e, "gpu", "cc")),
    ("SMs", lambda e: _get(e, "gpu", "sm_count")),
    ("shared memory per SM", lambda e: _unit(_get(e, "gpu", "smem_per_sm_kb"), "KB")),
    ("L2 cache", lambda e: _unit(_get(e, "gpu", "l2_mb"), "MB")),
    ("memory", lambda e: _unit(_get(e, "gpu", "mem_total_mb"), "MB")),
    ("peak DRAM bandwidth", lambda e: _unit(_get(e, "gpu", "peak_bw_gbs"), "GB/s")),
    ("memory clock / bus", _mem_clock),
    ("SM clock max", lambda e: _unit(_get(e, "gpu", "sm_clock_max_mhz"), "MHz")),
    ("driver", lambda e: _get(e, "gpu", "driver") or _get(e, "gpu", "driver_api")),
    ("CUDA", lambda e: " / ".join(f"{k} {v}" for k, v in sorted((_get(e, "cuda") or {}).items()) if v) or None),
    ("C / C++ compiler", _compilers),
    ("CMake", lambda e: _get(e, "cmake")),
    ("Ninja", lambda e: _get(e, "ninja")),
    ("OS", _os),
    ("CPU", _cpu),
    ("CPU instruction set of the build", _isa),
    ("CPU features llama.cpp reports", _features),
    ("CMake flags", lambda e: code(" ".join(portable_args(e["cmake_flags"]))) if e.get("cmake_flags") else None),
]


def base_line(b: dict[str, Any]) -> str:
    commit = str(b.get("commit") or "")
    s = f"commit {code(commit[:12])}" if commit else "commit not recorded"
    if b.get("upstream"):
        s = f"{code(b['upstream'])}, " + s
    if b.get("provenance"):  # a git-route base: what it is, as far as it was compared with upstream
        s += f" ({b['provenance']})"
    elif b.get("upstream_verified"):
        s += " (verified: upstream's own commit and tree)"
    elif b.get("route") == "sdist":
        sdist, sha = code(b.get("sdist_file") or "sdist"), code(str(b.get("sdist_sha256") or "")[:12])
        s += f" (imported from {sdist}, sha256 {sha}; not verified as upstream's commit)"
    else:
        s += " (not verified against upstream)"
    return s


def _fingerprint_table(hw: list[Hardware]) -> Block:
    rows = []
    for label, fn in HW_FIELDS:
        vals = []
        for h in hw:
            v = fn(h.env) if h.env else None
            vals.append(DASH if v in (None, "") else v)
        if label.startswith("GPU") or any(v != DASH for v in vals):
            rows.append([label, *vals])
    rows.append(["run", *[code(h.run_id) for h in hw]])
    return table(["", *[h.gpu for h in hw]], rows)


def gpu_line(h: Hardware) -> str:
    """'NVIDIA H200 (cc 9.0)', or the CPU label of a run without a GPU."""
    cc = _get(h.env, "gpu", "cc")
    return f"{h.gpu} (cc {cc})" if cc else h.gpu


def _gist(hw: list[Hardware]) -> str:
    parts = []
    for h in hw:
        e = h.env or {}
        bits = [
            x for x in (_unit(_get(e, "gpu", "peak_bw_gbs"), "GB/s"), _unit(_get(e, "gpu", "driver"), "driver")) if x
        ]
        if _get(e, "cuda", "nvcc"):
            bits.append(f"CUDA {_get(e, 'cuda', 'nvcc')}")
        parts.append(gpu_line(h) + (f": {', '.join(str(b) for b in bits)}" if bits else ""))
    return "; ".join(parts) + "; base, patch sha256s, toolchain"


def _upstream_pr(s: str) -> str:
    if not s:
        return DASH
    r = related(s)
    return f"[{r.label}]({r.url})" if r.url else s


def _patch_table(ev: Evidence) -> list[Block]:
    rows = [
        [
            code(p.id),
            p.subject,
            code(p.file),
            code(p.sha256[:12]) if p.sha256 else DASH,
            ", ".join(code(d) for d in p.depends_on) or "none",
            DASH if p.local else _upstream_pr(p.upstream_pr),
            "local test-only" if p.local else "yes",
        ]
        for p in ev.patches
    ]
    header = ["patch", "subject", "file", "sha256", "depends on", "upstream PR", "in this PR"]
    return [table(header, rows), text("Raw logs: none (sha256s recorded in `results.json`)")]


def markdown(ev: Evidence) -> list[Block]:
    hw = ev.hardware
    out = [_fingerprint_table(hw)]
    missing = [h.gpu for h in hw if h.env_missing]
    out.append(
        text(
            "Raw logs: none (recorded in `env.json`"
            + (f"; no `env.json` for {', '.join(missing)}" if missing else "")
            + ")"
        )
    )
    bases = {base_line(h.base) for h in hw}
    if len(bases) == 1:
        out.append(text("Base: " + bases.pop() + "."))
    else:
        out.append(bullets([f"Base on {h.gpu}: {base_line(h.base)}" for h in hw]))
    if ev.patches:
        out += _patch_table(ev)
    warn = [text("Merged with `--force` although: " + "; ".join(ev.merge_problems) + ".")] if ev.merge_problems else []
    return [*warn, details(_gist(hw), out)]
