"""Parser of ptxas's resource usage report (`nvcc -Xptxas -v`, ptxas 13.0), per kernel and arch.

    ptxas info    : Compiling entry function '_Z18flash_attn_ext_f16ILi256E...' for 'sm_90'
    ptxas info    : Function properties for _Z18flash_attn_ext_f16ILi256E...
        16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 233 registers, used 1 barriers, 16 bytes cumulative stack size, 2176 bytes smem,
        560 bytes cmem[0]   (one line)

Lines that are not ptxas's (the compile command, compiler warnings, Ninja's status lines, other units'
output in a build log) are skipped. `smem` is the kernel's static shared memory as ptxas counts it
(without the 1 KB the driver reserves per block from cc 8.0). An entry function whose `Used` line never
comes (output cut off) is refused, naming its line. Pure: the text in, records out.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from patchkit.parsers.common import err, split_lines, strip_ansi

_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\w+)'\s*$")
_PROPS = re.compile(r"^ptxas info\s*: Function properties for (?P<name>\S+)\s*$")
_FRAME = re.compile(
    r"^\s*(?P<frame>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads\s*$"
)
_USED = re.compile(r"^ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
_FIELD = re.compile(
    r"^(?P<n>\d+) bytes (?P<what>cumulative stack size|smem|cmem\[\d+\])$|^used (?P<bars>\d+) barriers$"
)


@dataclass(frozen=True)
class KernelResources:
    """One entry function compiled for one arch, as ptxas reported it."""

    name: str  # mangled
    arch: str  # "sm_90"
    registers: int
    smem: int  # static shared memory, bytes
    stack: int  # cumulative stack size, bytes (the stack frame when ptxas gives no cumulative size)
    spill_stores: int
    spill_loads: int
    barriers: int
    line: int  # the `Used` line, 1-based

    @property
    def spill(self) -> int:
        return self.spill_stores + self.spill_loads

    def to_dict(self) -> dict:
        return asdict(self)


def _used_fields(rest: str) -> dict[str, int]:
    out = {"smem": 0, "stack": -1, "barriers": 0}
    for part in (p.strip() for p in rest.split(",")):
        if not part:
            continue
        m = _FIELD.match(part)
        if m is None:
            continue  # a field a newer ptxas added: kept out, not fatal
        if m["bars"] is not None:
            out["barriers"] = int(m["bars"])
        elif m["what"] == "smem":
            out["smem"] = int(m["n"])
        elif m["what"] == "cumulative stack size":
            out["stack"] = int(m["n"])
    return out


def parse_ptxas(text: str, source: str) -> list[KernelResources]:
    """Every (entry function, arch) ptxas reported in `text`, in order. ParseError naming `source` and
    the line when an entry function's report is incomplete or a `Used` line has no entry function."""
    pending: tuple[str, str, int] | None = None  # name, arch, line of "Compiling entry function"
    frames: dict[str, tuple[int, int, int]] = {}
    props_for: str | None = None
    out: list[KernelResources] = []
    for i, raw in enumerate(split_lines(strip_ansi(text)), 1):
        ln = raw.rstrip()
        if m := _ENTRY.match(ln):
            if pending is not None:
                raise err(source, pending[2], f"ptxas report of {pending[0]!r} ({pending[1]}) has no 'Used' line")
            pending, props_for = (m["name"], m["arch"], i), None
        elif m := _PROPS.match(ln):
            props_for = m["name"]
        elif m := _FRAME.match(ln):
            if props_for is not None:
                frames[props_for] = (int(m["frame"]), int(m["stores"]), int(m["loads"]))
        elif m := _USED.match(ln):
            if pending is None:
                raise err(source, i, "ptxas 'Used ... registers' line without a 'Compiling entry function' line")
            name, arch, _ = pending
            f = _used_fields(m["rest"])
            frame, stores, loads = frames.pop(name, (0, 0, 0))
            stack = f["stack"] if f["stack"] >= 0 else frame
            out.append(KernelResources(name, arch, int(m["regs"]), f["smem"], stack, stores, loads, f["barriers"], i))
            pending = None
    if pending is not None:
        raise err(source, pending[2], f"ptxas report of {pending[0]!r} ({pending[1]}) has no 'Used' line (truncated?)")
    return out


def by_kernel(records: list[KernelResources], source: str) -> dict[tuple[str, str], KernelResources]:
    """{(mangled name, arch): record}. The same kernel compiled twice for one arch (two units that
    instantiate it) keeps the first report when both agree; ParseError when they differ."""
    out: dict[tuple[str, str], KernelResources] = {}
    for r in records:
        key = (r.name, r.arch)
        old = out.get(key)
        if old is not None and (old.registers, old.smem) != (r.registers, r.smem):
            what = f"{r.name} for {r.arch} reported twice with different resources (first at line {old.line})"
            raise err(source, r.line, what)
        out.setdefault(key, r)
    return out
