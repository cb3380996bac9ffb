"""Predicted occupancy of the measured launches on GPUs not at hand (bench:occupancy's report part).

A measured launch (ncu: block size, grid, dynamic shared memory) is matched to the compile check's
ptxas report of the same kernel for the target's arch (registers per thread, static shared memory), by
the kernel's name and template arguments: ncu prints the kernel demangled
(`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>(...)`), ptxas mangled (`_Z18flash_attn_ext_f16ILi256E...`).
`kernel_key` reads both as (name, arguments); a name it cannot read, or two compile-check records of one
key with different resources, is no match (said so), never a guess.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import OptionError
from patchkit.measure import occupancy_formula as occ
from patchkit.measure.occupancy import Cliff, Launch
from patchkit.results.data.base import ABSENT, Data
from patchkit.results.data.check import CheckData, CheckKernel

_BUILTIN = {
    "v": "void",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "f": "float",
    "d": "double",
}


def kernel_key(name: str) -> tuple[str, tuple[str, ...]] | None:
    """(function name, template arguments) of a kernel name, mangled or demangled; None when unreadable."""
    return _mangled(name) if name.startswith("_Z") else _demangled(name)


def _demangled(name: str) -> tuple[str, tuple[str, ...]] | None:
    s = name.strip().removeprefix("void ").strip()
    m = re.match(r"[A-Za-z_]\w*", s)
    if m is None:
        return None
    fn, rest = m.group(0), s[m.end() :]
    if not rest.startswith("<"):
        return fn, ()
    args, depth, cur = [], 0, ""
    for ch in rest:
        if ch == "<":
            depth += 1
            if depth == 1:
                continue
        elif ch == ">":
            depth -= 1
            if depth == 0:
                args.append(cur)
                break
        elif ch == "," and depth == 1:
            args.append(cur)
            cur = ""
            continue
        cur += ch
    return fn, tuple(_norm_arg(a) for a in args)


def _norm_arg(a: str) -> str:
    a = a.strip()
    a = {"true": "1", "false": "0"}.get(a, a)
    a = re.sub(r"^\([\w:]+\)\s*(-?\d+)$", r"\1", a)  # (ggml_type)2
    a = re.sub(r"^(-?\d+)[uUlL]*$", r"\1", a)
    return a


def _name_at(s: str, i: int) -> tuple[str, int] | None:
    m = re.match(r"\d+", s[i:])
    if m is None:
        return None
    n, j = int(m.group(0)), i + m.end()
    return s[j : j + n], j + n


def _skip(s: str, i: int) -> int | None:
    """The index of the 'E' that closes the type list starting at i (nested I..E and names skipped)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c.isdigit():
            got = _name_at(s, i)
            if got is None:
                return None
            i = got[1]
            continue
        if c == "I":
            depth += 1
        elif c == "E":
            if depth == 0:
                return i
            depth -= 1
        elif c == "S":
            j = s.find("_", i)
            if j < 0:
                return None
            i = j
        i += 1
    return None


def _arg(s: str, i: int) -> tuple[str, int] | None:
    c = s[i]
    if c == "L":  # a literal: L <type> <value> E
        j = i + 1
        if s[j] == "S":
            j = s.find("_", j) + 1
        elif s[j].isdigit():
            got = _name_at(s, j)
            if got is None:
                return None
            j = got[1]
        elif s[j] in _BUILTIN:
            j += 1
        else:
            return None
        m = re.match(r"(n?)(\d+)E", s[j:])
        if m is None:
            return None
        return str(-int(m.group(2)) if m.group(1) else int(m.group(2))), j + m.end()
    if s.startswith("XadL_Z", i):  # &function
        j = i + len("XadL_Z")
        j += s[j] == "L"
        if s[j] == "N":  # a nested name: its last part
            j, part = j + 1, ""
            while s[j] != "E":
                got = _name_at(s, j)
                if got is None:
                    return None
                part, j = got
            j += 1
        else:
            got = _name_at(s, j)
            if got is None:
                return None
            part, j = got
        end = _skip(s, j)
        if end is None or not s.startswith("E", end + 1):
            return None
        return "&" + part, end + 2
    if c in _BUILTIN:
        return _BUILTIN[c], i + 1
    if c.isdigit():
        got = _name_at(s, i)
        if got is None or s[got[1] : got[1] + 1] == "I":
            return None
        return got
    return None


def _mangled(name: str) -> tuple[str, tuple[str, ...]] | None:
    got = _name_at(name, 2)
    if got is None:
        return None
    fn, i = got
    if name[i : i + 1] != "I":
        return fn, ()
    args, i = [], i + 1
    while i < len(name) and name[i] != "E":
        a = _arg(name, i)
        if a is None:
            return None
        args.append(a[0])
        i = a[1]
    return fn, tuple(args)


@dataclass(kw_only=True)
class Prediction(Data):
    """`predict_row`'s answer: a measured launch on a target GPU, or only `error` where the formula could not
    (a Data class so that the report's JSON holds it as it always did: absent keys left out)."""

    registers: int = ABSENT  # per thread, from the compile check
    smem_static: int = ABSENT  # bytes per block, from the compile check
    blocks_per_sm: int = ABSENT
    limiter: str = ABSENT
    theoretical_pct: float = ABSENT
    waves: float | None = ABSENT
    cliff: Cliff = ABSENT
    error: str = ABSENT


def check_kernels(data: CheckData) -> list[CheckKernel]:
    """The compile check's per-kernel records (patchkit.measure.resources: name, arch 'sm_89', registers,
    smem, log) of a check step's data, each with its variant: the one whose log it was read from
    (`raw/check-cuda-<arch>-<variant>.log`; '' when the log's name does not say)."""
    out = []
    for k in data.kernels or []:
        if not k.variant:
            arch = k.arch.removeprefix("sm_")
            m = re.fullmatch(rf"check-cuda-{re.escape(arch)}-(.+?)(?:\.\d+)?\.log", Path(k.log).name)
            k = dataclasses.replace(k, variant=m.group(1) if m else "")
        out.append(k)
    return out


def lookup(records: list[CheckKernel], variant: str, kernel: str) -> tuple[CheckKernel | None, str]:
    """The one compile-check record of `kernel` (ncu's name) for `variant`, or (None, why)."""
    key = kernel_key(kernel)
    if key is None:
        return None, "kernel name not readable"
    hits = [r for r in records if r.variant == variant and kernel_key(r.name) == key]
    if not hits:
        return (
            None,
            "not in this variant's compile check (it compiles the units its patches change and the CUDA units "
            "the series end compiles; base, the template instances of the kernel-path cases' K/V types)",
        )
    if len({(r.registers, r.smem) for r in hits}) > 1:
        return None, "ambiguous: compiled with different resources under one name"
    return hits[0], ""


def default_targets(archs: list[str]) -> list[str]:
    """One GPU of patchkit/data/gpus.toml per checked arch: the first listed with that compute capability."""
    out = []
    for a in archs:
        cc = occ.arch_cc(a)
        g = next((g for g in occ.gpus().values() if g.cc == cc), None)
        if g is not None:
            out.append(g.name)
    return list(dict.fromkeys(out))


def predict_row(launch: Launch, rec: CheckKernel, target: occ.Gpu) -> Prediction:
    """blocks per SM, limiter, theoretical occupancy, waves and cliffs of a measured launch on `target`,
    with the compile check's registers and static shared memory."""
    from patchkit.measure.occupancy import launch as to_launch

    ln = to_launch(launch)
    try:
        o = occ.predict(ln, rec.registers, rec.smem, target)
        lim = occ.limits(target.cc)
    except OptionError as e:
        return Prediction(error=str(e))
    cl = occ.cliff(occ.Launch(rec.registers, ln.threads, rec.smem, ln.smem_dynamic, grid=ln.grid), lim)
    return Prediction(
        registers=rec.registers,
        smem_static=rec.smem,
        blocks_per_sm=o.blocks_per_sm,
        limiter=o.limiter,
        theoretical_pct=round(100 * o.theoretical, 2),
        waves=o.waves,
        cliff=Cliff(**cl),
    )
