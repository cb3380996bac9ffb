"""The points of a sweep: the grid over the spec's parameters (plus its explicit points), checked
against the real header, each with its patch and its key.

A point's patch is written here, not by git: a git format-patch file (fixed author, date and
subject, full blob ids, one hunk with three lines of context) whose bytes depend only on the header
and the values, so the same inputs give the same bytes on every machine and git version. It applies
with `git am` on the start variant (patchkit.sweep.check proves it for every point it compiles).
A point's key is sha256(start variant key, patch bytes): a finished point is never redone and a
changed input (another base, patch, header or value) is never served stale. The starting row itself
is a point, the reference, with an empty patch.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from pathlib import PurePosixPath

from patchkit.build import table as tbl
from patchkit.sweep.spec import SweepError, SweepSpec, Value, evaluate, expression_names, hint, parse_expression

AUTHOR = "patchkit sweep <sweep@patchkit.invalid>"
DATE = "Thu, 1 Jan 2026 00:00:00 +0000"
CONTEXT = 3


@dataclass(frozen=True, kw_only=True)
class Point:
    name: str  # e.g. nthreads128-occupancy2-nbatch_fa64
    values: dict[str, Value]  # the swept columns
    row: dict[str, Value]  # every column of the row as this point has it
    reference: bool  # the starting row itself
    patch: bytes  # b"" for the reference
    key: str

    @property
    def changes(self) -> dict[str, Value]:
        return {} if self.reference else dict(self.values)


@dataclass(frozen=True, kw_only=True)
class Plan:
    spec: SweepSpec
    table: tbl.Table
    row: tbl.Row
    start_key: str
    points: tuple[Point, ...]  # the reference first, then the grid in order, then the explicit points
    combinations: int  # grid points before the constraints
    excluded: int  # left out by the constraints

    @property
    def reference(self) -> Point:
        return self.points[0]

    def point(self, name: str) -> Point:
        return next(p for p in self.points if p.name == name)


def point_key(start_key: str, patch: bytes) -> str:
    h = hashlib.sha256()
    h.update(start_key.encode() + b"\0")
    h.update(patch)
    return h.hexdigest()


def point_name(values: dict[str, Value]) -> str:
    return "-".join(f"{k}{tbl.format_value(v)}" for k, v in values.items())


def _bind(spec: SweepSpec, text: str) -> tuple[tbl.Table, tbl.Row]:
    """The function's table and the spec's row, every name and type checked against the source."""
    try:
        table = tbl.parse_table(text, spec.function, spec.macro)
    except LookupError as e:
        raise SweepError(f"{spec.at('function')}: {e} in {spec.file}") from None
    cols = table.columns
    where_cols = f"not a column of {table.macro.name} ({spec.file}:{table.macro.line})"
    for k in spec.row:
        if k not in cols:
            raise SweepError(f"{spec.at('row', k)}: {where_cols}{hint(k, cols)}")
    found = table.find(spec.row)
    desc = ", ".join(f"{k}={tbl.format_value(v)}" for k, v in spec.row.items())
    if not found:
        raise SweepError(f"{spec.at('row')}: no row {desc} in {spec.function} ({spec.file}:{table.line})")
    if len(found) > 1:
        lines = ", ".join(str(r.line) for r in found)
        raise SweepError(f"{spec.at('row')}: {desc} matches {len(found)} rows of {spec.function} (lines {lines})")
    row = found[0]
    current = row.as_dict(cols)
    named = [(spec.param_at(k), k, v) for k, vs in spec.params.items() for v in vs]
    named += [(spec.at("points", i, k), k, v) for i, p in enumerate(spec.points) for k, v in p.items()]
    for where, k, v in named:
        if k not in cols:
            raise SweepError(f"{where}: {where_cols}{hint(k, cols)}")
        if k in spec.row:
            raise SweepError(f"{where}: is a key column of the row")
        have = current[k]
        if isinstance(have, str):
            raise SweepError(f"{where}: the row's {k} is {have!r} ({spec.file}:{row.line}), not a literal to change")
        if type(v) is not type(have):
            want = "true or false" if isinstance(have, bool) else "whole numbers"
            got = f"{type(v).__name__} {tbl.format_value(v)}"
            raise SweepError(f"{where}: expected {want} (the row has {tbl.format_value(have)}), got {got}")
    return table, row


def _constraints(spec: SweepSpec, cols: tuple[str, ...]) -> list[tuple[str, str, object]]:
    out = []
    for i, c in enumerate(spec.constraints):
        where = spec.at("constraints", i)
        tree = parse_expression(c, where)
        for n in sorted(expression_names(tree)):
            if n not in cols:
                raise SweepError(f"{where}: {c!r}: {n!r} is not a column of the table{hint(n, cols)}")
        out.append((where, c, tree))
    return out


def _satisfies(full: dict[str, Value], checks: list[tuple[str, str, object]]) -> bool:
    for where, text, tree in checks:
        try:
            if not evaluate(tree, full):  # type: ignore[arg-type]
                return False
        except ZeroDivisionError:
            raise SweepError(f"{where}: {text!r} divides by zero at {point_name(full)}") from None
    return True


def candidates(spec: SweepSpec, table: tbl.Table, row: tbl.Row) -> tuple[list[dict[str, Value]], int, int]:
    """Full rows of every point but the reference: (rows, grid combinations, left out by constraints).
    The constraints filter the grid; the spec's explicit points are always tried."""
    current = row.as_dict(table.columns)
    checks = _constraints(spec, table.columns)
    names = list(spec.params)
    grid = [dict(zip(names, combo)) for combo in itertools.product(*spec.params.values())] if names else []
    rows, excluded, seen = [], 0, set()
    for i, change in enumerate([*grid, *spec.points]):
        full = {**current, **change}
        if i < len(grid) and not _satisfies(full, checks):  # explicit points are always tried
            excluded += 1
            continue
        key = tuple(sorted(full.items()))
        if full != current and key not in seen:  # a set: a large grid is not quadratic
            seen.add(key)
            rows.append(full)
    return rows, len(grid), excluded


def _changed_span(old: list[str], new: list[str]) -> tuple[int, int, int]:
    """(first differing line, end in old, end in new) of two line lists."""
    i = 0
    while i < min(len(old), len(new)) and old[i] == new[i]:
        i += 1
    j = 0
    while j < min(len(old), len(new)) - i and old[-1 - j] == new[-1 - j]:
        j += 1
    return i, len(old) - j, len(new) - j


def _funcname(lines: list[str], before: int) -> str:
    """git's default hunk header text: the last line above the hunk starting with a letter, _ or $."""
    for ln in reversed(lines[:before]):
        if ln[:1].isalpha() or ln[:1] in ("_", "$"):
            return " " + ln.rstrip()[:80]
    return ""


def _diff_lines(prefix: str, lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        out.append(prefix + ln if ln.endswith("\n") else prefix + ln + "\n\\ No newline at end of file\n")
    return out


def unified_diff(path: str, old: str, new: str, *, mode: str = "100644") -> str:
    """The `diff --git` of one file whose change is one block of lines (what a row rewrite gives)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    i, end_a, end_b = _changed_span(a, b)
    lo = max(0, i - CONTEXT)
    hi_a, hi_b = min(len(a), end_a + CONTEXT), min(len(b), end_b + CONTEXT)
    n_a, n_b = hi_a - lo, hi_b - lo
    hunk = [f"@@ -{lo + 1},{n_a} +{lo + 1},{n_b} @@{_funcname(a, lo)}\n"]
    hunk += _diff_lines(" ", a[lo:i]) + _diff_lines("-", a[i:end_a]) + _diff_lines("+", b[i:end_b])
    hunk += _diff_lines(" ", a[end_a:hi_a])
    return (
        f"diff --git a/{path} b/{path}\n"
        f"index {blob_id(old)}..{blob_id(new)} {mode}\n"
        f"--- a/{path}\n+++ b/{path}\n" + "".join(hunk)
    )


def blob_id(text: str) -> str:
    data = text.encode("utf-8", "surrogateescape")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def subject(spec: SweepSpec, current: dict[str, Value], full: dict[str, Value]) -> str:
    key = ", ".join(tbl.format_value(v) for v in spec.row.values())
    changes = ", ".join(f"{k} {tbl.format_value(full[k])}" for k in full if full[k] != current[k])
    return f"{spec.function}({key}): {changes}"


def make_patch(spec: SweepSpec, text: str, new_text: str, old_line: str, new_line: str, subj: str) -> bytes:
    """A git format-patch file (deterministic bytes) changing spec.file from `text` to `new_text`. Its
    bytes depend on the change only (not on the sweep's or the point's name), so the same values in
    another sweep of the same start variant have the same key."""
    diff = unified_diff(spec.file, text, new_text)
    body = (
        f"Made by `patchkit sweep` on top of variant {spec.start}. In\n"
        f"{spec.function} ({PurePosixPath(spec.file).name}) the row\n\n"
        f"    {old_line.strip()}\n\nbecomes\n\n    {new_line.strip()}\n"
    )
    adds = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    dels = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    stat = (
        f" {spec.file} | {adds + dels} {'+' * adds}{'-' * dels}\n"
        f" 1 file changed, {adds} insertion{'s' * (adds != 1)}(+), {dels} deletion{'s' * (dels != 1)}(-)\n"
    )
    out = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        f"From: {AUTHOR}\nDate: {DATE}\nSubject: [PATCH] {subj}\n\n{body}---\n{stat}\n{diff}-- \npatchkit sweep\n\n"
    )
    return out.encode("utf-8", "surrogateescape")


def _line(text: str, n: int) -> str:
    return text.splitlines()[n - 1]


def plan(spec: SweepSpec, text: str, *, start_key: str) -> Plan:
    """Every point of the sweep, checked against the header `text` of the start variant."""
    table, row = _bind(spec, text)
    current = row.as_dict(table.columns)
    rows, combos, excluded = candidates(spec, table, row)
    if not rows:
        why = (
            f"{excluded} of {combos + len(spec.points)} left out by the constraints"
            if excluded
            else "all equal the row"
        )
        raise SweepError(f"{spec.at('params')}: the grid is empty: no point to try ({why})")
    named = list(dict.fromkeys([*spec.params, *(k for p in spec.points for k in p)]))
    ref = Point(
        name=point_name({k: current[k] for k in named}),
        values={k: current[k] for k in named},
        row=current,
        reference=True,
        patch=b"",
        key=point_key(start_key, b""),
    )
    points = [ref]
    for full in rows:
        values = {k: full[k] for k in named}
        name = point_name(values)
        new_text = tbl.rewrite_row(text, table, row, full)
        patch = make_patch(
            spec, text, new_text, _line(text, row.line), _line(new_text, row.line), subject(spec, current, full)
        )
        points.append(
            Point(name=name, values=values, row=full, reference=False, patch=patch, key=point_key(start_key, patch))
        )
    return Plan(
        spec=spec,
        table=table,
        row=row,
        start_key=start_key,
        points=tuple(points),
        combinations=combos,
        excluded=excluded,
    )
