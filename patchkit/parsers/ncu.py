"""Nsight Compute `ncu --csv` output (details page, one row per launch x metric), and the per-kernel
summary of the launches."""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from patchkit.parsers.common import err, last_content_line, snip, split_lines
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
    grand = math.fsum(a[1] for a in acc.values())
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


# ---------------------------------------------------------------------------------------------
# Occupancy and bandwidth per launch (step bench:occupancy): the sections LaunchStats, Occupancy,
# SpeedOfLight and MemoryWorkloadAnalysis printed with `--print-metric-name name`

# field of LaunchStats -> the ncu metric names it is read from (the first one present)
OCC_METRICS: dict[str, tuple[str, ...]] = {
    "registers": ("launch__registers_per_thread",),
    "block_size": ("launch__block_size",),
    "grid_size": ("launch__grid_size",),
    "smem_static": ("launch__shared_mem_per_block_static",),
    "smem_dynamic": ("launch__shared_mem_per_block_dynamic",),
    "smem_driver": ("launch__shared_mem_per_block_driver",),
    "smem_config": ("launch__shared_mem_config_size",),
    "sm_count": ("launch__sm_count",),
    "limit_registers": ("launch__occupancy_limit_registers",),
    "limit_shared_mem": ("launch__occupancy_limit_shared_mem",),
    "limit_warps": ("launch__occupancy_limit_warps",),
    "limit_blocks": ("launch__occupancy_limit_blocks",),
    "theoretical_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "achieved_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "waves": ("launch__waves_per_multiprocessor",),
    "dram_pct": (
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "dram_bytes": ("dram__bytes.sum",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
}
_PCT_FIELDS = ("theoretical_pct", "achieved_pct", "dram_pct", "l2_hit_pct")
LIMITS = ("registers", "shared_mem", "warps", "blocks")  # ncu's occupancy limits, launch__occupancy_limit_<x>


@dataclass(frozen=True, kw_only=True)
class LaunchStats:
    """One profiled launch with its occupancy and memory metrics (None: ncu did not print the metric).
    flagged: values that cannot be (a percentage above 100 or below 0, a negative count), kept as
    printed and named here. metrics: every numeric metric of the launch by name."""

    id: int
    kernel_name: str
    duration_ns: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    cc: str = ""
    process_id: int | None = None
    registers: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    smem_static: float | None = None
    smem_dynamic: float | None = None
    smem_driver: float | None = None
    smem_config: float | None = None
    sm_count: float | None = None
    limit_registers: float | None = None
    limit_shared_mem: float | None = None
    limit_warps: float | None = None
    limit_blocks: float | None = None
    theoretical_pct: float | None = None
    achieved_pct: float | None = None
    waves: float | None = None
    dram_pct: float | None = None
    dram_bytes: float | None = None
    l2_hit_pct: float | None = None
    flagged: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    line: int

    @property
    def limits(self) -> dict[str, int]:
        """ncu's blocks per SM by each limiting resource (those it printed)."""
        return {k: int(v) for k in LIMITS if (v := getattr(self, f"limit_{k}")) is not None}

    @property
    def blocks_per_sm(self) -> int | None:
        """ncu's blocks per SM: the least of its limits."""
        lim = self.limits
        return min(lim.values()) if lim else None

    @property
    def limiters(self) -> tuple[str, ...]:
        """The resources whose limit is the least (ties: all of them, in LIMITS order)."""
        b = self.blocks_per_sm
        return tuple(k for k, v in self.limits.items() if v == b)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("metrics")
        d["flagged"] = list(self.flagged)
        return d


def parse_ncu_occupancy(text: str, source: str) -> list[LaunchStats]:
    """Parse `ncu --csv --print-units base --print-metric-name name --section LaunchStats --section
    Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics
    dram__bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum` output, one LaunchStats per
    launch (Process ID, ID), in the order printed.

    Columns by name from the header row (ID, Kernel Name, Metric Name, Metric Value required); metrics
    by name (OCC_METRICS), any other metric kept in `metrics`; rule rows (no metric name) and the lines
    around the CSV (the program's output, ==PROF== lines) ignored. ncu ends a metric row with an empty
    field and fewer fields than the header; such rows are read as they are. Every launch must carry
    gpu__time_duration.sum. Impossible values are kept and named in `flagged`."""
    lines = split_lines(text)
    header: list[str] | None = None
    last = last_content_line(lines)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, ln in enumerate(lines):
        s = ln.strip()
        if header is None:
            header = _header(s, source, i + 1)
            continue
        if not s.startswith('"'):
            continue
        r = _loose_row(s, header, source, i + 1, last=i + 1 == last)
        if r["ID"] == "ID" or not r["Metric Name"]:  # a repeated header, or a rule's row
            continue
        _add_metric(groups, r, source, i + 1)
    if header is None:
        raise err(source, None, "no ncu CSV header found (expected a line starting with '\"ID\",'): not ncu --csv")
    if not groups:
        raise err(source, None, "ncu CSV has no metric rows: no kernel was profiled")
    return [_occ_launch(key[1], g, source) for key, g in groups.items()]


def _loose_row(s: str, header: list[str], source: str, n: int, *, last: bool) -> dict[str, str]:
    try:
        row = next(csv.reader([s]))
    except csv.Error as e:
        raise err(source, n, f"garbled ncu CSV row: {e}") from None
    if len(row) > len(header) or len(row) < _min_width(header):
        if last:
            raise err(source, n, "truncated: the last ncu CSV row is incomplete")
        raise err(source, n, f"garbled ncu CSV row: {len(row)} fields, header has {len(header)}")
    if last and not s.endswith(('"', '",')):
        raise err(source, n, "truncated: the last ncu CSV row is incomplete")
    return dict(zip(header, row + [""] * (len(header) - len(row))))


def _min_width(header: list[str]) -> int:
    """The fewest fields a row may have: up to and including the last required column."""
    return 1 + max(header.index(c) for c in _REQUIRED)


def _occ_launch(launch_id: str, g: dict[str, Any], source: str) -> LaunchStats:
    r = g["row"]
    m = {k: v for k, v in g["metrics"].items() if not isinstance(v, str)}  # the numbers (no 'n/a')
    if g["duration"] is None:
        raise err(
            source, g["line"], f"ncu launch ID {launch_id} ({snip(r['Kernel Name'], 40)}) has no '{_DURATION}' metric"
        )
    vals = {f: next((m[n] for n in names if n in m), None) for f, names in OCC_METRICS.items()}
    flagged = [f"{f} = {v:g} % (above 100 %)" for f in _PCT_FIELDS if (v := vals[f]) is not None and v > 100]
    flagged += [f"{f} = {v:g} (negative)" for f, v in vals.items() if v is not None and v < 0]
    if g["duration"] < 0:
        flagged.append(f"duration_ns = {g['duration']:g} (negative)")
    return LaunchStats(
        id=int(launch_id),
        kernel_name=r["Kernel Name"],
        duration_ns=g["duration"],
        grid=_dim3(r.get("Grid Size")),
        block=_dim3(r.get("Block Size")),
        cc=r.get("CC", ""),
        process_id=_opt_int(r.get("Process ID")),
        flagged=tuple(flagged),
        metrics=m,
        line=g["line"],
        **vals,
    )
