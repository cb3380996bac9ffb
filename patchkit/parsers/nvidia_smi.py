"""nvidia-smi's clock, temperature and clock-event query (one CSV line per GPU), and its `-q` text.

The query is the one tests/fixtures/occupancy/nvidia-smi-clocks.csv was recorded with on an H200
(`CLOCK_QUERY`, `--format=csv,noheader,nounits`). `clocks_throttle_reasons.active` is a bitmask
(nvml's nvmlClocksEventReasons): idle, application clocks, sync boost and display clock are not
slowdowns; the power cap, HW slowdown, thermal and power-brake bits are (NVBench discards a sample
taken while the clock is below its threshold; patchkit flags the round, see docs/kernel-timing.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patchkit.errors import ParseError

CLOCK_QUERY = "timestamp,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active"
CLOCK_ARGS = ("--query-gpu=" + CLOCK_QUERY, "--format=csv,noheader,nounits")

# nvmlClocksEventReasons bits, named as `nvidia-smi -q` names them
REASONS = {
    0x1: "Idle",
    0x2: "Applications Clocks Setting",
    0x4: "SW Power Cap",
    0x8: "HW Slowdown",
    0x10: "Sync Boost",
    0x20: "SW Thermal Slowdown",
    0x40: "HW Thermal Slowdown",
    0x80: "HW Power Brake Slowdown",
    0x100: "Display Clock Setting",
}
SLOWDOWN = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # the bits that lower the SM clock under load


@dataclass(frozen=True, kw_only=True)
class ClockSample:
    timestamp: str
    sm_mhz: int
    max_sm_mhz: int
    mem_mhz: int | None
    temp_c: int
    power_w: float | None
    reasons: int  # the clocks_throttle_reasons.active bitmask

    @property
    def active(self) -> list[str]:
        return [name for bit, name in REASONS.items() if self.reasons & bit]

    @property
    def slowdowns(self) -> list[str]:
        return [name for bit, name in REASONS.items() if self.reasons & bit & SLOWDOWN]

    def to_dict(self) -> dict:
        return {
            "timestamp": self.timestamp,
            "sm_mhz": self.sm_mhz,
            "max_sm_mhz": self.max_sm_mhz,
            "mem_mhz": self.mem_mhz,
            "temp_c": self.temp_c,
            "power_w": self.power_w,
            "reasons": f"0x{self.reasons:x}",
            "active": self.active,
        }


def _num(field: str, what: str, source: str, line: int, cast=int, optional: bool = False):
    f = field.strip()
    if optional and (f.startswith("[") or f in ("N/A", "")):  # [N/A], [Not Supported]
        return None
    try:
        return cast(f, 0) if cast is int and f.lower().startswith("0x") else cast(f)
    except ValueError:
        raise ParseError(f"{source}:{line}: nvidia-smi {what}: expected a number, got {f!r}") from None


def parse_clocks_csv(text: str, source: str) -> list[ClockSample]:
    """One sample per GPU line of `nvidia-smi --query-gpu=CLOCK_QUERY --format=csv,noheader,nounits`."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        f = [x.strip() for x in line.split(",")]
        if len(f) != 7:
            raise ParseError(f"{source}:{i}: nvidia-smi clock query: expected 7 fields ({CLOCK_QUERY}), got {len(f)}")
        out.append(
            ClockSample(
                timestamp=f[0],
                sm_mhz=_num(f[1], "clocks.sm", source, i),
                max_sm_mhz=_num(f[2], "clocks.max.sm", source, i),
                mem_mhz=_num(f[3], "clocks.mem", source, i, optional=True),
                temp_c=_num(f[4], "temperature.gpu", source, i),
                power_w=_num(f[5], "power.draw", source, i, float, optional=True),
                reasons=_num(f[6], "clocks_throttle_reasons.active", source, i),
            )
        )
    if not out:
        raise ParseError(f"{source}: nvidia-smi clock query: no GPU line")
    return out


POWER_QUERY = "timestamp,power.draw"
POWER_ARGS = ("--query-gpu=" + POWER_QUERY, "--format=csv,noheader,nounits", "--id=0", "-lms", "100")


@dataclass(frozen=True, kw_only=True)
class PowerSample:
    timestamp: str  # nvidia-smi's 'YYYY/MM/DD HH:MM:SS.mmm'
    seconds: float  # the timestamp as seconds since midnight (a sampling window is seconds long)
    power_w: float | None  # None: [N/A] or [Not Supported]


def parse_power_csv(text: str, source: str) -> list[PowerSample]:
    """The samples of `nvidia-smi --query-gpu=POWER_QUERY --format=csv,noheader,nounits --id=0 -lms 100`
    (nvidia-smi's documented csv: one line per sample, fields as queried). The sampler is ended by a
    signal, so a last line cut short is dropped; any other line that is not a sample is an error."""
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    out = []
    for n, (i, line) in enumerate(lines):
        f = [x.strip() for x in line.split(",")]
        m = re.fullmatch(r"\d{4}/\d\d/\d\d (\d\d):(\d\d):(\d\d(?:\.\d+)?)", f[0])
        if len(f) != 2 or not m:
            if n == len(lines) - 1 and out:
                break  # cut short by the signal that ended the sampler
            raise ParseError(f"{source}:{i}: nvidia-smi power query: expected 2 fields ({POWER_QUERY}), got {line!r}")
        secs = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        out.append(PowerSample(timestamp=f[0], seconds=secs, power_w=_num(f[1], "power.draw", source, i, float, True)))
    return out


def parse_q_clock_reasons(text: str) -> dict[str, bool]:
    """`nvidia-smi -q -d PERFORMANCE`'s 'Clocks Event Reasons' (or older 'Clocks Throttle Reasons')
    section: reason name -> active."""
    out: dict[str, bool] = {}
    inside = False
    for line in text.splitlines():
        if re.match(r"^\s*Clocks? (Event|Throttle) Reasons\s*$", line):
            inside = True
            continue
        m = re.match(r"^\s+(\S.*?)\s*:\s*(Active|Not Active)\s*$", line)
        if inside and m:
            out[m.group(1)] = m.group(2) == "Active"
        elif inside and line.strip():
            break
    return out
