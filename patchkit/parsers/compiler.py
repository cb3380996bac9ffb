"""Build logs (CMake configure, Ninja running gcc/clang/nvcc): the first error, as 'file:line: message'."""

from __future__ import annotations

import os
import re

_GCC_ERR = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")
_NVCC_ERR = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.*)$")
_CMAKE_ERR = re.compile(r"^CMake Error(?: at (?P<file>[^:]+):(?P<line>\d+))?.*")
# Ninja 1.11 writes `FAILED: <outputs>`, Ninja 1.12 `FAILED: [code=N] <outputs>`
_NINJA_FAILED = re.compile(r"^FAILED: (?:\[code=-?\d+\] )?", re.M)
_PTXAS = re.compile(r"^ptxas\s+(?:fatal|error)\s*:\s*(.+)$", re.M)
_WHERE = re.compile(r"^([^:\s]+)(?=:\d+: )")  # the file of 'file:line: message'


def ninja_failures(log_text: str) -> dict[str, str]:
    """Ninja's FAILED blocks of a build log: the first output of each failed edge -> the block's text
    (its FAILED line, the command, and what the command printed, up to the next FAILED line)."""
    out: dict[str, str] = {}
    starts = list(_NINJA_FAILED.finditer(log_text))
    for i, m in enumerate(starts):
        block = log_text[m.start() : starts[i + 1].start() if i + 1 < len(starts) else len(log_text)]
        head = log_text[m.end() :].split("\n", 1)[0].split()
        out.setdefault(head[0] if head else "", block)
    return out


def first_compiler_error(log_text: str) -> str | None:
    """'file:line: message' of the first compiler (gcc/clang/nvcc) or CMake error in a build log."""
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        m = _GCC_ERR.match(line) or _NVCC_ERR.match(line)
        if m:
            msg = m.group("msg").strip()
            # nvcc puts the static_assert text on the next lines
            if not msg or msg.endswith(("failed", "failed with")):
                for nxt in lines[i + 1 : i + 3]:
                    if nxt.strip():
                        msg += " " + nxt.strip()
                        break
            return f"{m.group('file')}:{m.group('line')}: {msg}"
        m = _CMAKE_ERR.match(line)
        if m:
            detail = next((ln.strip() for ln in lines[i + 1 : i + 6] if ln.strip()), "")
            where = f"{m.group('file')}:{m.group('line')}: " if m.group("file") else ""
            return f"{where}CMake Error: {detail}"
    return None


def block_error(block: str, tree: str = "") -> str:
    """The first error of one of Ninja's FAILED blocks (nvcc/gcc/CMake, else ptxas, else the first line
    that says error, else the first output line), with the source tree's path `tree` taken off."""
    ptx = _PTXAS.search(block)
    err = first_compiler_error(block[: ptx.start()] if ptx else block)
    if err is None and ptx:
        err = "ptxas error: " + ptx.group(1).strip()
    if err is None:  # skip the FAILED line and the command
        lines = [ln.strip() for ln in block.splitlines()[2:] if ln.strip() and not ln.startswith(("[", "ninja:"))]
        err = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "failed")
    if tree:  # the tree's path where a path starts (not inside another path)
        err = re.sub(rf"(?<![\w./-]){re.escape(tree.rstrip('/'))}/", "", err)
    return _WHERE.sub(lambda m: os.path.normpath(m.group(1)), err, count=1)


def failed_objects(log_text: str, tree: str = "") -> dict[str, str]:
    """Ninja's FAILED blocks of a build log -> the first error in each (`block_error`)."""
    return {obj: block_error(block, tree) for obj, block in ninja_failures(log_text).items()}
