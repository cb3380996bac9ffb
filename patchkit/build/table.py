"""A config table in C/C++/CUDA source: a function made of rows that call one function-like macro.

    #define GGML_CUDA_FATTN_MMA_CONFIG_CASE(DKQ_, DV_, ncols_, nthreads_, ...) ...
    static constexpr ... ggml_cuda_fattn_mma_get_config_ampere(const int DKQ, ...) {
        GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8, 128, 2,  64, 128, 128, 128, 2, true);
        ...
    }

Pure functions on the source text: the macro's column names (its parameter names, one trailing '_'
dropped), the rows of a function, and one row rewritten with new values, the file byte-identical
everywhere else and the row's column widths kept (each changed value right-aligned in its old width).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Value = int | bool | str  # str: a cell that is not a literal (kept as written, never swept)

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)", re.M)
_INT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, kw_only=True)
class Macro:
    name: str
    columns: tuple[str, ...]
    line: int  # 1-based line of the #define


@dataclass(frozen=True, kw_only=True)
class Row:
    line: int  # 1-based
    values: tuple[Value, ...]
    cells: tuple[str, ...]  # each argument as written, with its surrounding blanks
    start: int  # offset of the first argument in the text (after '(')
    end: int  # offset of the closing ')'

    def as_dict(self, columns: tuple[str, ...]) -> dict[str, Value]:
        return dict(zip(columns, self.values))


@dataclass(frozen=True, kw_only=True)
class Table:
    macro: Macro
    function: str
    line: int  # 1-based line of the function's name
    rows: tuple[Row, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.macro.columns

    def find(self, key: dict[str, Value]) -> list[Row]:
        """The rows whose columns equal `key` (names of columns)."""
        idx = [(self.columns.index(k), v) for k, v in key.items()]
        return [r for r in self.rows if all(_same(r.values[i], v) for i, v in idx)]


def _same(a: Value, b: Value) -> bool:
    return type(a) is type(b) and a == b


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def macros(text: str) -> dict[str, Macro]:
    """Every function-like macro #defined in the text: name -> its column names."""
    out: dict[str, Macro] = {}
    for m in _DEFINE.finditer(text):
        cols = tuple(_column(p) for p in m.group(2).split(",") if p.strip())
        out.setdefault(m.group(1), Macro(name=m.group(1), columns=cols, line=line_of(text, m.start())))
    return out


def _column(param: str) -> str:
    p = param.strip()
    return p[:-1] if p.endswith("_") and len(p) > 1 else p


def parse_value(cell: str) -> Value:
    s = cell.strip()
    if _INT.fullmatch(s):
        return int(s)
    if s in ("true", "false"):
        return s == "true"
    return s


def format_value(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _skip_blank_and_comments(text: str, i: int) -> int:
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = len(text) if j < 0 else j + 2
        else:
            break
    return i


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """Offset of the bracket closing the one at `i` (strings, chars and comments skipped); -1 if none."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if text.startswith("//", i) or text.startswith("/*", i):
            i = _skip_blank_and_comments(text, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


_QUALIFIERS = re.compile(r"(?:\s|const\b|noexcept\b|override\b|final\b|->\s*[\w:<>]+)*")


def function_body(text: str, function: str) -> tuple[int, int, int] | None:
    """(name offset, body start '{', body end '}') of the definition of `function`, or None."""
    for m in re.finditer(rf"\b{re.escape(function)}\s*\(", text):
        close = _matching(text, m.end() - 1, "(", ")")
        if close < 0:
            continue
        q = _QUALIFIERS.match(text, close + 1)
        j = _skip_blank_and_comments(text, q.end() if q else close + 1)
        if j < len(text) and text[j] == "{":
            end = _matching(text, j, "{", "}")
            if end > 0:
                return m.start(), j, end
    return None


def split_args(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) offsets of the top-level comma-separated arguments in text[start:end]."""
    out, depth, s = [], 0, start
    for i in range(start, end):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append((s, i))
            s = i + 1
    out.append((s, end))
    return out


def called_macros(text: str, start: int, end: int, known: dict[str, Macro]) -> list[str]:
    """Names of the #defined macros that start a statement in text[start:end], in order, once each."""
    seen: list[str] = []
    for m in re.finditer(r"^[ \t]*(\w+)[ \t]*\(", text[start:end], re.M):
        if m.group(1) in known and m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


def parse_table(text: str, function: str, macro: str = "") -> Table:
    """The rows of `function` (each a statement `MACRO(...);`), with MACRO's columns.

    Raises LookupError (a one-line reason) when the function is not defined in the text, when it
    calls no #defined macro (or `macro` is not one), or when the macro to use is ambiguous."""
    found = function_body(text, function)
    if found is None:
        raise LookupError(f"no definition of function {function!r}")
    name_at, body_start, body_end = found
    known = macros(text)
    called = called_macros(text, body_start, body_end, known)
    if macro:
        if macro not in known:
            raise LookupError(f"no #define of macro {macro!r}")
        if macro not in called:
            raise LookupError(f"function {function} has no rows calling {macro}")
    elif len(called) != 1:
        what = ", ".join(called) if called else "no #defined macro"
        raise LookupError(f"function {function} calls {what}: name the table's macro (key 'macro')")
    use = known[macro or called[0]]
    rows = []
    for m in re.finditer(rf"^[ \t]*{re.escape(use.name)}[ \t]*\(", text[body_start:body_end], re.M):
        open_ = body_start + m.end() - 1
        close = _matching(text, open_, "(", ")")
        if close < 0 or close > body_end:
            continue
        spans = split_args(text, open_ + 1, close)
        cells = tuple(text[a:b] for a, b in spans)
        rows.append(
            Row(
                line=line_of(text, open_),
                values=tuple(parse_value(c) for c in cells),
                cells=cells,
                start=open_ + 1,
                end=close,
            )
        )
    for r in rows:
        if len(r.values) != len(use.columns):
            raise LookupError(f"line {r.line}: {len(r.values)} values for the {len(use.columns)} columns of {use.name}")
    return Table(macro=use, function=function, line=line_of(text, name_at), rows=tuple(rows))


def _cell(old: str, value: Value) -> str:
    """`value` in the place of the cell `old`: right-aligned in the old width, blanks kept."""
    core = old.strip()
    lead = len(old) - len(old.lstrip())
    tail = old[len(old.rstrip()) :]
    width = lead + len(core)
    s = format_value(value)
    new = s.rjust(width)
    if lead and not new.startswith((" ", "\t")):
        new = " " + s
    return new + tail


def rewrite_row(text: str, table: Table, row: Row, values: dict[str, Value]) -> str:
    """The text with `row` holding `values` (column -> value) in place of its own; every byte
    outside the changed cells is kept."""
    cells = list(row.cells)
    for col, v in values.items():
        i = table.columns.index(col)
        if not _same(row.values[i], v):
            cells[i] = _cell(row.cells[i], v)
    return text[: row.start] + ",".join(cells) + text[row.end :]
