"""Nsight Compute `ncu --csv` output (details page, one row per launch x metric), and the per-kernel
summary of the launches."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from typing import Any

from patchkit.parsers.common import err, snip, split_lines
from patchkit.parsers.records import KernelLaunch, KernelSummary

_DURATION = "gpu__time_duration.sum"
_REQUIRED = ("ID", "Kernel Name", "Metric Name", "Metric Value")
_TIME_UNITS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def parse_ncu_csv(text: str, source: str) -> list[KernelLaunch]:
    """Parse Nsight Compute `ncu --csv --print-units base --metrics gpu__time_duration.sum,...` output.

    The expected layout (ncu's details page as CSV, one row per launch and metric) is::

        ==PROF== Connected to process 1234 (/path/test-backend-ops)
        ==PROF== Profiling "flash_attn_ext_f16" - 0: 0%....50%....100% - 1 pass
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",
            "Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
        "0","1234","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<...>(...)","1","7",
            "(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics",
            "gpu__time_duration.sum","ns","12,544"

    Columns are taken by name from the header row (the first line starting with '"ID",'); required:
    ID, Kernel Name, Metric Name, Metric Value. '==PROF==' / '==WARNING==' lines and the profiled
    program's own output are ignored. Rows are grouped per launch by (Process ID, ID). Values may use
    thousands separators. Every launch must carry gpu__time_duration.sum (time units ns/us/ms/s are
    converted to ns).
    """
    lines = split_lines(text)
    header: list[str] | None = None
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, ln in enumerate(lines):
        s = ln.strip()
        if header is None:
            header = _header(s, source, i + 1)
        elif s.startswith('"'):  # not ==PROF== lines or program output
            r = _row(s, header, source, i + 1, last=i == last)
            if r["ID"] != "ID":  # a repeated header (several reports concatenated)
                _add_metric(groups, r, source, i + 1)
    if header is None:
        if not text.strip():
            raise err(source, None, "truncated: empty output (expected ncu --csv output)")
        raise err(
            source,
            None,
            "no ncu CSV header found (expected a line starting with '\"ID\",'); "
            "truncated, no kernel was profiled, or not --csv output",
        )
    return [_launch(key[1], g, source) for key, g in groups.items()]


def _header(s: str, source: str, n: int) -> list[str] | None:
    """The column names when s is the header row, else None."""
    if not s.startswith('"ID",'):
        return None
    header = next(csv.reader([s]))
    for req in _REQUIRED:
        if req not in header:
            raise err(source, n, f"ncu CSV header lacks required column '{req}'")
    return header


def _row(s: str, header: list[str], source: str, n: int, *, last: bool) -> dict[str, str]:
    try:
        row = next(csv.reader([s]))
    except csv.Error as e:
        raise err(source, n, f"garbled ncu CSV row: {e}") from None
    if len(row) != len(header) or not s.endswith('"'):
        if last:
            raise err(source, n, "truncated: the last ncu CSV row is incomplete")
        raise err(source, n, f"garbled ncu CSV row: {len(row)} fields, header has {len(header)}")
    return dict(zip(header, row))


def _add_metric(groups: dict[tuple[str, str], dict[str, Any]], r: dict[str, str], source: str, n: int) -> None:
    """One metric row into the group of its launch (Process ID, ID)."""
    key = (r.get("Process ID", ""), r["ID"])
    g = groups.get(key)
    if g is None:
        if _opt_int(r["ID"]) is None:
            raise err(source, n, f"ncu CSV: ID is not a number: {snip(r['ID'], 30)}")
        g = groups[key] = {"row": r, "line": n, "metrics": {}, "units": {}, "duration": None}
    name, unit, value = r["Metric Name"], r.get("Metric Unit", ""), r["Metric Value"]
    x = _number(value)
    if name == _DURATION:
        if x is None:
            raise err(source, n, f"ncu CSV: {_DURATION} is not a number: {snip(value, 30)}")
        scale = _TIME_UNITS.get(unit.strip() or "ns")
        if scale is None:
            raise err(source, n, f"ncu CSV: unknown time unit {snip(unit, 20)} for {_DURATION}")
        g["duration"] = x * scale
        return
    g["metrics"][name] = x if x is not None else value
    if unit:
        g["units"][name] = unit


def _launch(launch_id: str, g: dict[str, Any], source: str) -> KernelLaunch:
    r = g["row"]
    if g["duration"] is None:
        raise err(
            source,
            g["line"],
            f"ncu launch ID {launch_id} ({snip(r['Kernel Name'], 40)}) has no '{_DURATION}' metric",
        )
    return KernelLaunch(
        id=int(launch_id),
        kernel_name=r["Kernel Name"],
        duration_ns=g["duration"],
        grid=_dim3(r.get("Grid Size")),
        block=_dim3(r.get("Block Size")),
        process_id=_opt_int(r.get("Process ID")),
        stream=_opt_int(r.get("Stream")),
        device=_opt_int(r.get("Device")),
        metrics=g["metrics"],
        units=g["units"],
        line=g["line"],
    )


def summarize_kernels(launches: Iterable[KernelLaunch]) -> list[KernelSummary]:
    """Per kernel name: launch count, total duration (ns) and share of the total, largest total first
    (ties by name)."""
    acc: dict[str, list[float]] = {}
    for k in launches:
        a = acc.setdefault(k.kernel_name, [0, 0.0])
        a[0] += 1
        a[1] += k.duration_ns
    grand = sum(a[1] for a in acc.values())
    rows = [KernelSummary(name, int(a[0]), a[1], (a[1] / grand) if grand > 0 else 0.0) for name, a in acc.items()]
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows


def _number(v: str) -> float | None:
    v = v.strip()
    if _THOUSANDS_RE.match(v):
        v = v.replace(",", "")
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _dim3(v: str | None) -> tuple[int, int, int] | None:
    if not v:
        return None
    nums = re.findall(r"\d+", v)
    if len(nums) != 3:
        return None
    return (int(nums[0]), int(nums[1]), int(nums[2]))


def _opt_int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v.replace(",", ""))
    except ValueError:
        return None
