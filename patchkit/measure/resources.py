"""Registers and static shared memory per kernel per arch, from the compile check's logs.

The check compiles its units with ptxas's resource report on (`--ptxas-options=-v`, added to
CMAKE_CUDA_FLAGS by `ptxas_cmake_options`); `from_logs` parses the Ninja logs it wrote into the step's
data: one row per (kernel, arch) with the unit it came from. A unit Ninja did not recompile (already up
to date in the check's build folder) prints no report: its kernels are missing, never guessed.
Names are demangled with c++filt for display (the mangled name stays the key).
"""

from __future__ import annotations

import re
from pathlib import Path

from patchkit import proc
from patchkit.errors import CommandError, ParseError, ToolNotFound
from patchkit.parsers.common import kernel_name, split_lines
from patchkit.parsers.ptxas import KernelResources, parse_ptxas

PTXAS_VERBOSE = "--ptxas-options=-v"
_CHECK_LOG = re.compile(r"^check-(?:cuda-[^-]+|cpu)-(?P<variant>.+)\.log$")  # build.check's log per variant
_UNIT = re.compile(r"Building CUDA object (?P<obj>\S+)\.o(?:\s|$)")


def ptxas_cmake_options(cmake_args: tuple[str, ...], cmake_options: tuple[str, ...]) -> tuple[str, ...]:
    """`cmake_options` plus a CMAKE_CUDA_FLAGS that keeps the value CMake would use (the last
    -DCMAKE_CUDA_FLAGS of the toolchain's args and the user's options) and adds the ptxas report."""
    last = ""
    for a in (*cmake_args, *cmake_options):
        m = re.match(r"-DCMAKE_CUDA_FLAGS(?::STRING)?=(.*)$", a)
        if m:
            last = m[1]
    if PTXAS_VERBOSE in last.split():
        return cmake_options
    return (*cmake_options, f"-DCMAKE_CUDA_FLAGS={(last + ' ') if last else ''}{PTXAS_VERBOSE}")


def _units(text: str) -> list[tuple[int, str]]:
    """(line, unit) of each Ninja 'Building CUDA object' status line."""
    out = []
    for i, ln in enumerate(split_lines(text), 1):
        m = _UNIT.search(ln)
        if m:
            obj = m["obj"]
            unit = obj.split("ggml-cuda.dir/", 1)[-1]
            out.append((i, unit))
    return out


def demangle(names: list[str]) -> dict[str, str]:
    """{mangled: demangled} through c++filt; a name c++filt is missing for maps to itself."""
    out = {n: n for n in names}
    todo = sorted(set(names))
    try:
        for k in range(0, len(todo), 200):
            chunk = todo[k : k + 200]
            done = proc.run(["c++filt", *chunk], echo=False, separate_stderr=True, check=True)
            lines = done.stdout.splitlines()
            if len(lines) == len(chunk):
                out.update(zip(chunk, lines))
    except (ToolNotFound, CommandError):
        pass
    return out


def short_name(demangled: str) -> str:
    """The kernel name with its template arguments, without 'void ' and the parameter list."""
    return kernel_name(demangled)


def match_key(name: str) -> str:
    """A key under which ptxas's demangled name and ncu's kernel name agree: ncu prints template
    bool arguments as 0/1 where c++filt prints false/true, and spaces differ."""
    s = short_name(name)
    s = re.sub(r"\bfalse\b", "0", re.sub(r"\btrue\b", "1", s))
    return re.sub(r"\s+", "", s)


def from_logs(logs: list[Path], rel=str) -> dict:
    """{"kernels": [row per (kernel, arch, unit)], "resource_errors": [one line per unreadable log]}.

    A row: the KernelResources fields, `unit` (the Ninja object it came from), `log`, `variant` (from the
    check's log name `check-<config>-<variant>.log`, "" otherwise) and `display` (demangled, no parameters)."""
    rows: list[dict] = []
    errors: list[str] = []
    for log in logs:
        text = log.read_text(errors="replace")
        try:
            recs: list[KernelResources] = parse_ptxas(text, rel(log))
        except ParseError as e:
            errors.append(str(e))
            continue
        units = _units(text)
        m = _CHECK_LOG.match(log.name)
        variant = m["variant"] if m else ""
        for r in recs:
            unit = next((u for line, u in reversed(units) if line < r.line), "")
            rows.append({**r.to_dict(), "unit": unit, "log": rel(log), "variant": variant})
    names = demangle([r["name"] for r in rows])
    for r in rows:
        r["display"] = short_name(names[r["name"]])
    return {"kernels": rows, "resource_errors": errors}


def lookup(kernels: list[dict], name: str, arch: str, variant: str | None = None) -> dict | None:
    """The row of kernel `name` (mangled, demangled or as ncu prints it) for `arch` ("89" or "sm_89"),
    of `variant` when given."""
    want = arch if arch.startswith("sm_") else f"sm_{arch}"
    key = match_key(name)
    for r in kernels:
        if variant is not None and r.get("variant") != variant:
            continue
        if r["arch"] == want and (r["name"] == name or match_key(r.get("display", "")) == key):
            return r
    return None
