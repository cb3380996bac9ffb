"""Format helpers for the markdown report: fixed number formats, cells, and the blocks the template lays out.

A section's markdown is a list of blocks: {"kind": "table", "header", "rows"}, {"kind": "list", "items"},
{"kind": "heading", "text"}, {"kind": "text", "text"}, {"kind": "code", "lines"} or
{"kind": "details", "summary", "blocks"} (a collapsed GitHub <details> block holding other blocks). Every
table is followed by a "Raw logs:" line naming its logs. Numbers have fixed formats (FORMATS) so the same
evidence gives the same bytes. Everything generated here is ASCII (llama.cpp's AGENTS.md asks for it).
"""

from __future__ import annotations

import html
import unicodedata
from pathlib import PurePosixPath
from typing import Any

Block = dict[str, Any]

NOT_PROVIDED = "_(not provided by the author)_"
DASH = "-"
ARROW = "->"
# decimals per quantity (tests read these to check every number in a table against the data)
FORMATS = {"us": 2, "ts": 2, "ratio": 3, "pct": 1, "seconds": 1, "kld": 6}
# a verdict as the report words it (old results.json files say "no measurable change")
VERDICT_WORDS = {"no measurable change": "no change"}


def num(x: Any, kind: str) -> str:
    if x is None or isinstance(x, bool):
        return DASH
    return f"{float(x):.{FORMATS[kind]}f}"


def interval(lo: Any, hi: Any, kind: str) -> str:
    return f"[{num(lo, kind)}, {num(hi, kind)}]"


def pct(x: Any) -> str:
    return DASH if x is None else f"{num(x, 'pct')} %"


def verdict_word(v: Any) -> str:
    return VERDICT_WORDS.get(str(v), str(v)) if v is not None else DASH


def code(s: Any) -> str:
    s = str(s)
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(s: Any) -> str:
    return str(s).replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def yes_no(x: Any) -> str:
    return DASH if x is None else ("yes" if x else "no")


def local_path(s: Any, root: Any = None) -> str:
    """A path as a reviewer can use it: relative to the run folder `root` when inside it, else its file name
    (an absolute path on the measuring machine opens nowhere else)."""
    s = str(s)
    if not s.startswith("/"):
        return s
    p = PurePosixPath(s)
    if root is not None:
        r = PurePosixPath(str(root))
        if p.is_relative_to(r):
            return str(p.relative_to(r))
    return p.name or s


def portable_args(args: list[Any]) -> list[str]:
    """Command-line arguments with absolute paths (also after '=') shown by their file name."""
    out = []
    for a in args:
        a = str(a)
        k, eq, v = a.partition("=")
        out.append(f"{k}={local_path(v)}" if eq and v.startswith("/") else local_path(a))
    return out


def table(header: list[str], rows: list[list[Any]]) -> Block:
    return {"kind": "table", "header": [cell(h) for h in header], "rows": [[cell(c) for c in r] for r in rows]}


def text(t: str) -> Block:
    return {"kind": "text", "text": t}


def bullets(items: list[str]) -> Block:
    return {"kind": "list", "items": [str(i).replace("\n", " ") for i in items]}


def heading(t: str) -> Block:
    return {"kind": "heading", "text": t}


def code_block(lines: list[str]) -> Block:
    return {"kind": "code", "lines": list(lines)}


def details(summary: str, blocks: list[Block]) -> Block:
    """A collapsed block: `summary` (plain text; HTML-escaped, markdown is not rendered there) and its blocks."""
    return {"kind": "details", "summary": html.escape(summary, quote=False), "blocks": blocks}


def logs_line(logs: list[str | None] | None, none: str = "none") -> Block:
    shown = [x for x in logs or [] if x]
    return text("Raw logs: " + (", ".join(code(x) for x in dict.fromkeys(shown)) if shown else none))


def state_label(status: Any, reason: Any) -> str:
    status, reason = str(status or ""), str(reason or "")
    if status == "ok":
        return "ok"
    if status == "fail":
        return "FAIL" + (f": {reason}" if reason else "")
    if status == "error":
        return "error" + (f": {reason}" if reason else "")
    if status == "interrupted":  # its reason names the signal and says a resume redoes it
        return reason or "interrupted"
    return "not run" + (f": {reason}" if reason else "")


def gpu_col(multi: bool, gpu: str) -> list[str]:
    """The GPU column's cell (or header): present only when several runs are merged."""
    return [gpu] if multi else []


def prefix(multi: bool, gpu: str) -> str:
    """'<gpu>: ' before a sentence about one run, when several runs are merged."""
    return f"{gpu}: " if multi else ""


def not_run(entries: list[Any], multi: bool) -> list[Block]:
    """'not run: reason' lines for runs whose step has no data (entries with gpu, status, reason)."""
    return [text(prefix(multi, e.gpu) + state_label(e.status, e.reason)) for e in entries]


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def non_ascii(s: str) -> list[str]:
    """The distinct non-ASCII characters of s as 'U+2014', in order of first appearance."""
    return [f"U+{ord(c):04X}" for c in dict.fromkeys(c for c in s if ord(c) > 127)]


# ---------------------------------------------------------------------------------------------
# ASCII: what patchkit writes is ASCII; data it quotes (a tool's reason, a compiler's version) is made so

ASCII = {
    "\u2013": "-",
    "\u2014": "-",
    "\u2212": "-",
    "\u2192": "->",
    "\u2190": "<-",
    "\u00d7": "x",
    "\u00b5": "u",
    "\u03bc": "u",
    "\u2026": "...",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u00b1": "+/-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00a0": " ",
    "\u2248": "~",
    "\u00ae": "(R)",
    "\u2122": "(TM)",
}


def ascii_text(s: str) -> str:
    """s in ASCII: known characters by their ASCII spelling, accents dropped, anything else as '?'."""
    if s.isascii():
        return s
    out = []
    for c in s:
        if c.isascii():
            out.append(c)
        elif c in ASCII:
            out.append(ASCII[c])
        else:
            base = unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode()
            out.append(base or "?")
    return "".join(out)


def ascii_blocks(blocks: list[Block]) -> list[Block]:
    """Every string of the blocks (cells, items, texts, summaries, nested blocks) in ASCII."""

    def conv(x: Any) -> Any:
        if isinstance(x, str):
            return ascii_text(x)
        if isinstance(x, list):
            return [conv(v) for v in x]
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        return x

    return [conv(b) for b in blocks]
