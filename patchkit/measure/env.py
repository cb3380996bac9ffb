"""The environment fingerprint of a run: GPU, driver, CUDA, compilers, OS, build flags, base, patches.

GPU properties come from the CUDA driver API through ctypes (libcuda), which every machine with an
NVIDIA driver has; no toolkit or Python GPU package is needed. Peak DRAM bandwidth is computed from
the memory clock and bus width the driver reports (2 transfers per clock).
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import socket
from typing import Any

from patchkit import proc
from patchkit.errors import ToolNotFound

# CUdevice_attribute values (cuda.h)
_ATTR = {
    "cc_major": 75,
    "cc_minor": 76,
    "sm_count": 16,
    "smem_per_sm": 81,
    "smem_per_block_optin": 97,
    "l2_bytes": 38,
    "mem_clock_khz": 36,
    "bus_width_bits": 37,
    "sm_clock_khz": 13,
}


def _probe(argv: list[str]) -> str | None:
    """A tool's output for a version or property probe; None where the tool is missing or fails."""
    try:
        done = proc.run(argv, check=False, echo=False, timeout=30)
    except ToolNotFound:
        return None
    return done.stdout if done.ok else None


def _version(argv: list[str], pattern: str | None = None) -> str | None:
    """The first line a tool prints for its version, or the pattern's first group where given."""
    out = _probe(argv)
    if out is None:
        return None
    if pattern:
        m = re.search(pattern, out)
        return m.group(1) if m else None
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else None


def cuda_devices() -> list[dict[str, Any]]:
    """Properties of each CUDA device from the driver API, [] where there is no driver or device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    if cuda.cuInit(0) != 0:
        return []
    n = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return []
    drv = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(drv))
    out = []
    for i in range(n.value):
        dev = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, dev)
        total = ctypes.c_size_t()
        cuda.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
        attrs = {}
        for key, code in _ATTR.items():
            v = ctypes.c_int()
            attrs[key] = v.value if cuda.cuDeviceGetAttribute(ctypes.byref(v), code, dev) == 0 else None
        peak = None
        if attrs["mem_clock_khz"] and attrs["bus_width_bits"]:
            peak = 2 * attrs["mem_clock_khz"] * 1e3 * attrs["bus_width_bits"] / 8 / 1e9
        out.append(
            {
                "index": i,
                "name": name.value.decode(errors="replace"),
                "cc": f"{attrs['cc_major']}.{attrs['cc_minor']}",
                "sm_count": attrs["sm_count"],
                "smem_per_sm_kb": (attrs["smem_per_sm"] or 0) // 1024,
                "smem_per_block_optin_kb": (attrs["smem_per_block_optin"] or 0) // 1024,
                "l2_mb": round((attrs["l2_bytes"] or 0) / 2**20, 1),
                "mem_total_mb": total.value // 2**20,
                "mem_clock_mhz": (attrs["mem_clock_khz"] or 0) // 1000,
                "bus_width_bits": attrs["bus_width_bits"],
                "peak_bw_gbs": round(peak, 1) if peak else None,
                "sm_clock_max_mhz": (attrs["sm_clock_khz"] or 0) // 1000,
                "driver_api": f"{drv.value // 1000}.{drv.value % 1000 // 10}",
            }
        )
    return out


def _nvidia_smi() -> dict[str, str]:
    out = _probe(
        [
            "nvidia-smi",
            "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit,pstate",
            "--format=csv,noheader,nounits",
        ]
    )
    lines = (out or "").strip().splitlines()
    if not lines:
        return {}
    parts = [p.strip() for p in lines[0].split(",")]
    keys = ["driver", "clocks_max_sm_mhz", "clocks_max_mem_mhz", "power_limit_w", "pstate"]
    return dict(zip(keys, parts))


def _cpu() -> dict[str, Any]:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count()}


def fingerprint(
    *, cmake_flags: list[str] | None = None, base: str = "", patches: dict[str, str] | None = None, gpu_index: int = 0
) -> dict[str, Any]:
    devices = cuda_devices()
    gpu = None
    if devices:
        gpu = dict(devices[min(gpu_index, len(devices) - 1)])
        gpu.update(_nvidia_smi())
        gpu["count"] = len(devices)
    nvcc = _version(["nvcc", "--version"], r"release (\d+\.\d+)")
    if nvcc is None and os.path.exists("/usr/local/cuda/bin/nvcc"):
        nvcc = _version(["/usr/local/cuda/bin/nvcc", "--version"], r"release (\d+\.\d+)")
    return {
        "host": socket.gethostname(),
        "os": {"system": platform.system(), "release": platform.release(), "machine": platform.machine()},
        "python": platform.python_version(),
        "cpu": _cpu(),
        "gpu": gpu,
        "cuda": {"nvcc": nvcc, "driver_api": gpu.get("driver_api") if gpu else None} if (gpu or nvcc) else None,
        "compiler": {"c": _version(["cc", "--version"]), "cxx": _version(["c++", "--version"])},
        "cmake": _version(["cmake", "--version"]),
        "ninja": _version(["ninja", "--version"]),
        "git": _version(["git", "--version"]),
        "cmake_flags": list(cmake_flags or []),
        "base": base,
        "patches": dict(patches or {}),
    }


# the instruction-set extensions a CPU build is described by (gcc's -m<name> switches), in this order
ISA_NAMES = (
    "sse4.2", "avx", "avx2", "fma", "f16c", "bmi2", "avxvnni",
    "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile", "amx-int8",
)  # fmt: skip


def build_isa(bdir: Any) -> dict[str, Any] | None:
    """The instruction set a CPU build compiled ggml-cpu for, from its build folder: the `-march` /
    `-m<ext>` flags of ggml-cpu's objects in build.ninja; `-march=native` resolved to what it means on this
    machine with the C compiler of CMakeCache.txt (`cc -march=native -Q --help=target`). None where the
    folder holds no ggml-cpu objects."""
    from pathlib import Path

    bdir = Path(bdir)
    try:
        ninja = (bdir / "build.ninja").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"^build \S*ggml-cpu\.dir/\S+\.c\.o:.*\n(?:  .*\n)*?  FLAGS = (.*)$", ninja, re.M)
    if not m:
        return None
    flags = [f for f in m.group(1).split() if f.startswith("-m") and not f.startswith("-mtune")]
    out: dict[str, Any] = {"flags": " ".join(flags) or "(none)", "from": "build.ninja: ggml-cpu's FLAGS"}
    if "-march=native" in flags:
        cache = (bdir / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace")
        cc = re.search(r"^CMAKE_C_COMPILER:FILEPATH=(.+)$", cache, re.M)
        text = _probe([cc.group(1).strip() if cc else "cc", "-march=native", "-Q", "--help=target"]) or ""
        march = re.search(r"^\s+-march=\s+(\S+)", text, re.M)
        on = {n for n in ISA_NAMES if re.search(rf"^\s+-m{re.escape(n)}\s+\[enabled\]", text, re.M)}
        out.update(
            march=march.group(1) if march else None,
            extensions=[n.upper() for n in ISA_NAMES if n in on],
            resolved="-march=native as the C compiler resolves it here (-Q --help=target)",
        )
    else:
        out["extensions"] = [n.upper() for n in ISA_NAMES if f"-m{n}" in flags]
    return out
