"""Format helpers for the markdown report: fixed number formats, cells, and the blocks the template lays out.

A section's markdown is a list of blocks: {"kind": "table", "header", "rows"}, {"kind": "list", "items"},
{"kind": "heading", "text"} or {"kind": "text", "text"}. Every table is followed by a "Raw logs:" line
naming its logs. Numbers have fixed formats (FORMATS) so the same evidence gives the same bytes.
"""

from __future__ import annotations

from typing import Any

Block = dict[str, Any]

NOT_PROVIDED = "_(not provided by the author)_"
DASH = "—"
# decimals per quantity (tests read these to check every number in a table against the data)
FORMATS = {"us": 2, "ts": 2, "ratio": 3, "pct": 1, "seconds": 1, "kld": 6}


def num(x: Any, kind: str) -> str:
    if x is None or isinstance(x, bool):
        return DASH
    return f"{float(x):.{FORMATS[kind]}f}"


def interval(lo: Any, hi: Any, kind: str) -> str:
    return f"[{num(lo, kind)}–{num(hi, kind)}]"


def pct(x: Any) -> str:
    return DASH if x is None else f"{num(x, 'pct')} %"


def code(s: Any) -> str:
    s = str(s)
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(s: Any) -> str:
    return str(s).replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def yes_no(x: Any) -> str:
    return DASH if x is None else ("yes" if x else "no")


def bench_test_name(n_gen: Any, depth: Any) -> str:
    """A llama-bench test as llama-bench names it: 'tg32', 'tg32 @ d4096'."""
    return f"tg{n_gen}" + (f" @ d{depth}" if depth else "")


def table(header: list[str], rows: list[list[Any]]) -> Block:
    return {"kind": "table", "header": [cell(h) for h in header], "rows": [[cell(c) for c in r] for r in rows]}


def text(t: str) -> Block:
    return {"kind": "text", "text": t}


def bullets(items: list[str]) -> Block:
    return {"kind": "list", "items": [str(i).replace("\n", " ") for i in items]}


def heading(t: str) -> Block:
    return {"kind": "heading", "text": t}


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
