r"""The rows of an `[[affects]]` macro that an edit changes, proven from the compiler's view of the file.

The units rule (patchkit.build.units) and the `--changed` scope (patchkit.run.scope) decide what *not* to rebuild,
check or measure from the changed rows of a config table. Their reading of the text must be the one the
compiler makes, or they must give up. A row edit whose line ends in a comment with a trailing backslash
splices the next physical line into the comment (translation phase 2 comes before comments are removed
in phase 3): the text shows one changed row, the compiler reads two (one changed, one gone).

So the rows are read twice, and an edit is understood only when both readings agree:

* the text's reading (`text_rows`): every changed line is one call of the macro;
* the compiler's reading (`logical_lines`): the real C++ preprocessor (`g++ -E`) runs translation
  phases 1-3 on each version of the file (line splicing, comments replaced by a space, tokens), with
  nothing #defined (`-undef`, no include folders) and every directive made inert: each physical line
  that starts a logical line gets a marker token in front of it, so a `#if`/`#include`/`#define` line is
  text, not a directive, and no macro of the file is defined or expanded. The marker of a line that a
  splice or a block comment joined to the line before disappears with it; the text between markers is
  one logical line as the compiler sees it.

Anything else (the preprocessor missing or failing, a line that is not one whole row, rows that differ
between the two readings, a cell that is not an integer or true/false literal) means: not understood,
"affects everything", with a one-line reason.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from pathlib import Path

from patchkit import proc
from patchkit.build import table as tbl
from patchkit.errors import PatchkitError

MARK = "__patchkit_logical_line__"
PREPROCESSOR = ("g++", "-E", "-P", "-undef", "-nostdinc", "-std=c++17", "-x", "c++")
_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n\Z")  # GCC splices a backslash, blanks, then a newline too
_ROW = re.compile(r"^\s*(?P<macro>\w+)\s*\((?P<args>[^()]*)\)\s*;?\s*(//.*)?$")

Rows = list[dict[str, tbl.Value]]


class NotProven(Exception):
    """The compiler's view of a file could not be had (the reason is the message)."""


def text_rows(old: str, new: str, macro: str) -> Rows | None:
    """The rows (column -> value; old and new versions) of `macro` that differ between two texts of a
    file, as the text reads; None when any other line differs or the macro's #define is not in the new text."""
    defined = tbl.macros(new)
    if macro not in defined:
        return None
    return _diff_rows(old.splitlines(), new.splitlines(), macro, defined[macro].columns)


def _diff_rows(a: list[str], b: list[str], macro: str, columns: tuple[str, ...]) -> Rows | None:
    rows: Rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for text in a[i1:i2] + b[j1:j2]:
            if not text.strip():
                continue
            m = _ROW.match(text)
            if not m or m.group("macro") != macro:
                return None
            values = [tbl.parse_value(c) for c in m.group("args").split(",")]
            if len(values) != len(columns):
                return None
            rows.append(dict(zip(columns, values)))
    return rows


def logical_lines(text: str, scratch: Path) -> list[str]:
    """The file's logical lines as the compiler reads them after translation phases 1-3 (real `g++ -E`),
    blanks collapsed; `scratch`: a folder of the work folder for the marked copy (deleted after)."""
    marked: list[str] = []
    joined = False
    for line in text.splitlines(keepends=True):
        marked.append(line if joined else f"{MARK} {line}")
        joined = bool(_SPLICE.search(line))
    scratch.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(dir=scratch, prefix=".patchkit-rows-", suffix=".h")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("".join(marked))
        try:
            done = proc.run([*PREPROCESSOR, path], echo=False, check=False, separate_stderr=True)
        except PatchkitError as e:
            raise NotProven(f"no C++ preprocessor to read it with ({e})") from None
    finally:
        Path(path).unlink(missing_ok=True)
    if not done.ok:
        raise NotProven(f"the C++ preprocessor (g++ -E) exited with {done.returncode} on it")
    return [" ".join(p.split()) for p in done.stdout.split(MARK)[1:]]


def _key(r: dict[str, tbl.Value]) -> tuple[str, ...]:
    return tuple(f"{type(v).__name__}:{v}" for v in r.values())


def _show(rows: Rows) -> str:
    return "; ".join("(" + ", ".join(tbl.format_value(v) for v in r.values()) + ")" for r in rows) or "none"


def changed(old: str, new: str, macro: str, scratch: Path) -> tuple[Rows | None, str]:
    """(the changed rows, '') when the edit is proven to change only rows of `macro`, with literal cells,
    in the compiler's view as in the text's; else (None, why not, one line)."""
    seen = text_rows(old, new, macro)
    if seen is None:
        return None, f"changed outside the rows of an [[affects]] rule ({macro})"
    try:
        a, b = logical_lines(old, scratch), logical_lines(new, scratch)
    except NotProven as e:
        return None, f"the edit is not proven to change only rows of {macro}: {e}"
    read = _diff_rows(a, b, macro, tbl.macros(new)[macro].columns)
    if read is None:
        return None, f"the compiler reads a change outside the rows of {macro} (a line splice or a comment?)"
    if sorted(map(_key, read)) != sorted(map(_key, seen)):
        return None, (
            f"the compiler reads other changed rows of {macro} than the text shows (a line splice or a "
            f"comment?): text {_show(seen)}; compiler {_show(read)}"
        )
    for r in read:
        for col, v in r.items():
            if isinstance(v, str):
                return None, f"a changed row of {macro} has {col} = {v!r}, not an integer or true/false literal"
    return read, ""
