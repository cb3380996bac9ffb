"""Helpers shared by the parsers: one-line errors, line splitting, ANSI colours and interleaved logs."""

from __future__ import annotations

import math
import re

from patchkit.errors import ParseError

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# ggml/llama log lines go to stderr, unbuffered, while the tool's results go to stdout, buffered:
# captured into one stream, a log line can land in the middle of a result line (seen on the H200:
# "...): ggml_backend_cuda_graph_compute: CUDA graph warmup complete\nnot supported [CUDA0]").
_INTERLEAVED = re.compile(r"(?<=[^\n])(?:ggml|llama|gguf)_[a-z0-9_]+: [^\n]*\n")


def strip_ansi(s: str) -> str:
    return _ANSI_RE.sub("", s)


def snip(s: str, n: int = 80) -> str:
    """A short one-line rendering of a piece of input for an error message."""
    s = s.replace("\r", "").replace("\n", " ")
    if len(s) > n:
        s = s[: n - 3] + "..."
    return repr(s)


def err(source: str, line: int | None, what: str) -> ParseError:
    """The one-line ParseError 'source:line: what' (or 'source: what' when the line is not known)."""
    where = f"{source}:{line}" if line is not None else source
    return ParseError(f"{where}: {what}".replace("\n", " "))


def split_lines(text: str) -> list[str]:
    """Lines without terminators and without a trailing '\\r' (a log written through a pty has them)."""
    return [ln.rstrip("\r") for ln in text.split("\n")]


def last_content_line(lines: list[str]) -> int:
    """The 1-based number of the last non-blank line (0 when there is none)."""
    return max((i + 1 for i, ln in enumerate(lines) if ln.strip()), default=0)


def float_or_none(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def sample(x: float | int | str, source: str, line: int | None, what: str) -> float:
    """x as a float, a measured number (a time, a rate): refused unless finite and not negative,
    naming the source and line (`-1e309`, `inf` or `nan` would turn every statistic over it into NaN)."""
    try:
        f = float(x)
    except OverflowError:  # an int of more than 308 digits
        f = math.inf
    if not math.isfinite(f) or f < 0:
        raise err(source, line, f"{what}: {snip(str(x), 40)} is not a finite, non-negative number")
    return f


def strip_interleaved_logs(text: str) -> str:
    """Remove ggml/llama log lines that were written into the middle of another line."""
    while True:
        new = _INTERLEAVED.sub("", text)
        if new == text:
            return text
        text = new


def kernel_name(name: str) -> str:
    """A demangled kernel name without 'void ' and its parameter list: 'void flash_attn_ext_f16<256, 256,
    8>(const char*, ...)' -> 'flash_attn_ext_f16<256, 256, 8>' (ncu's names and c++filt's alike)."""
    s = name.removeprefix("void ")
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            return s[:i]
    return s
