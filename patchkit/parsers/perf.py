"""`test-backend-ops perf` output (pinned base ggml-org/llama.cpp@0c1e57098):

* `--output sql`: `CREATE TABLE IF NOT EXISTS test_backend_ops (...)` then one
  `INSERT INTO test_backend_ops (cols...) VALUES ('v', ...);` per case, every value single-quoted.
* console: `  OP(params):<pad>    N runs - T us/run - F xFLOP/run - R xFLOPS`, or
  `... - K kB/run - B GB/s` for ops without a FLOP count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from patchkit.parsers.common import (
    err,
    last_content_line,
    sample,
    snip,
    split_lines,
    strip_ansi,
    strip_interleaved_logs,
)
from patchkit.parsers.records import PerfRecord

_SQL_REQUIRED = ("backend_name", "op_name", "op_params", "time_us", "n_runs")
_SQL_FIELDS = ("supported", "flops", "bandwidth_gb_s", "memory_kb")  # optional columns that are fields
# Column types as test-backend-ops declares them (used when the CREATE TABLE is not in the text).
_SQL_KNOWN_TYPES = {
    "supported": "INTEGER",
    "passed": "INTEGER",
    "memory_kb": "INTEGER",
    "n_runs": "INTEGER",
    "time_us": "REAL",
    "flops": "REAL",
    "bandwidth_gb_s": "REAL",
}
_CREATE_RE = re.compile(r"CREATE TABLE(?: IF NOT EXISTS)? (\w+) \(")
_SQL_COL_RE = re.compile(r"^\s*(\w+) (\w+),?\s*$")
_INSERT_RE = re.compile(r"INSERT INTO (\w+) \(([^)]*)\) VALUES \(")
_SQL_BARE_RE = re.compile(r"[^,)\s]+")

_TESTING_RE = re.compile(r"^Testing (\d+) devices$")
_BACKEND_INIT_RE = re.compile(r"^Backend (\d+)/(\d+): (.+)$")
_BACKENDS_PASSED_RE = re.compile(r"^(?P<pre>.*?)(\d+)/(\d+) backends passed$")
_CASE_START_RE = re.compile(r"^  [A-Za-z][A-Za-z0-9_]*\(")
_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "": 1.0}
_PERF_LINE_RE = re.compile(
    r"^  (?P<op>[A-Za-z][A-Za-z0-9_]*)\((?P<params>.*)\): +(?P<runs>\d+) runs - +(?P<us>[0-9.eE+-]+|inf|nan) us/run - +"
    r"(?:(?P<fpr>[0-9.]+) (?P<fpru>[kMGT]?)FLOP/run - +(?P<fl>[0-9.]+) (?P<flu>[kMGT]?)FLOPS"
    r"|(?P<kb>\d+) kB/run - +(?P<gbs>[0-9.]+|inf|nan) GB/s)\s*$"
)
_PERF_NS_RE = re.compile(r"^  (?P<op>[A-Za-z][A-Za-z0-9_]*)\((?P<params>.*)\): not supported\s*$")


# ------------------------------------------------------------------------------------------- --output sql


@dataclass
class _Sql:
    source: str
    last_content: int
    types: dict[str, str] = field(default_factory=dict)
    in_create: bool = False
    seen_sql: bool = False


def parse_perf_sql(text: str, source: str) -> list[PerfRecord]:
    """Parse `test-backend-ops perf ... --output sql`: the INSERT statements, by their column list.

    Required columns: backend_name, op_name, op_params, time_us, n_runs. Types come from the CREATE TABLE
    in the text when present (else the types test-backend-ops declares). supported/flops/bandwidth_gb_s/
    memory_kb become fields; all other columns (test_time, build_commit, device_description, ...) go to
    `extra`. Lines that are not SQL (backend logs, 'failed to allocate tensors') are ignored.
    Raises ParseError when no SQL is found at all, on a truncated/garbled INSERT, on a missing required
    column, or when a row is not a perf result (test_mode other than 'perf').
    """
    lines = split_lines(strip_interleaved_logs(text))
    st = _Sql(source=source, last_content=last_content_line(lines))
    records: list[PerfRecord] = []
    for i, s in enumerate(lines):
        n = i + 1
        if st.in_create:
            _create_column(st, n, s)
        elif _CREATE_RE.search(s):
            st.seen_sql = st.in_create = True
            st.types = {}
        elif "INSERT INTO " in s:
            st.seen_sql = True
            records.append(_sql_record(_insert_row(st, n, s), source, n))
    if st.in_create:
        raise err(source, None, "truncated: output ends inside CREATE TABLE")
    if not st.seen_sql:
        raise err(
            source,
            None,
            "no SQL found (expected 'CREATE TABLE test_backend_ops' / 'INSERT INTO "
            "test_backend_ops'); empty or truncated output, or not --output sql",
        )
    return records


def _create_column(st: _Sql, n: int, s: str) -> None:
    """A line inside CREATE TABLE: 'name TYPE,' or the closing ');'."""
    if s.strip().startswith(");"):
        st.in_create = False
        return
    m = _SQL_COL_RE.match(s)
    if m:
        st.types[m[1]] = m[2]
        return
    if n == st.last_content:
        raise err(st.source, n, "truncated: output ends inside CREATE TABLE")
    raise err(st.source, n, f"garbled CREATE TABLE column, expected 'name TYPE,': {snip(s)}")


def _insert_row(st: _Sql, n: int, s: str) -> dict[str, Any]:
    """The typed values of the INSERT statement on line n, by column name."""
    source = st.source
    k = s.find("INSERT INTO ")
    m = _INSERT_RE.match(s, k)
    if not m:
        raise err(source, n, f"garbled or truncated INSERT statement: {snip(s[k:])}")
    cols = [c.strip() for c in m[2].split(",")]
    vals, end = _sql_values(s, m.end(), source, n)
    if not s[end:].lstrip().startswith(";"):
        raise err(source, n, "truncated INSERT statement (no ';' after the values)")
    if len(vals) != len(cols):
        raise err(source, n, f"garbled INSERT: {len(cols)} columns but {len(vals)} values")
    for req in _SQL_REQUIRED:
        if req not in cols:
            raise err(source, n, f"INSERT lacks required column '{req}'")
    types = st.types
    return {c: _sql_convert(c, types.get(c, _SQL_KNOWN_TYPES.get(c, "TEXT")), v, source, n) for c, v in zip(cols, vals)}


def _sql_record(row: dict[str, Any], source: str, n: int) -> PerfRecord:
    mode = row.get("test_mode")
    if mode is not None and mode != "perf":
        raise err(source, n, f"not a perf result (test_mode '{mode}')")
    for req in _SQL_REQUIRED:
        if row[req] is None:
            raise err(source, n, f"required column '{req}' is NULL")
    sup = row.get("supported")
    for col in ("time_us", "flops", "bandwidth_gb_s"):
        if row.get(col) is not None:
            row[col] = sample(row[col], source, n, f"column {col}")
    return PerfRecord(
        backend_name=str(row["backend_name"]),
        op_name=str(row["op_name"]),
        op_params=str(row["op_params"]),
        time_us=float(row["time_us"]),
        n_runs=int(row["n_runs"]),
        supported=bool(int(sup)) if sup is not None else True,
        flops=_opt_float(row.get("flops")),
        bandwidth_gb_s=_opt_float(row.get("bandwidth_gb_s")),
        memory_kb=int(row["memory_kb"]) if row.get("memory_kb") is not None else None,
        extra={c: v for c, v in row.items() if c not in _SQL_REQUIRED and c not in _SQL_FIELDS},
        line=n,
    )


def _sql_values(s: str, pos: int, source: str, line: int) -> tuple[list[str | None], int]:
    """Values of `VALUES (` ... `)` starting at pos (just after the '('): quoted strings, bare numbers or
    NULL. Returns the values and the position after ')'."""
    vals: list[str | None] = []
    while True:
        pos = _skip_blanks(s, pos, source, line)
        if s[pos] == "'":
            val, pos = _sql_quoted(s, pos, source, line)
            vals.append(val)
        else:
            m = _SQL_BARE_RE.match(s, pos)
            if not m:
                raise err(source, line, f"garbled INSERT values near {snip(s[pos : pos + 30])}")
            vals.append(None if m.group(0).upper() == "NULL" else m.group(0))
            pos = m.end()
        pos = _skip_blanks(s, pos, source, line)
        if s[pos] == ",":
            pos += 1
            continue
        if s[pos] == ")":
            return vals, pos + 1
        raise err(source, line, f"garbled INSERT values near {snip(s[pos : pos + 30])}")


def _skip_blanks(s: str, pos: int, source: str, line: int) -> int:
    while pos < len(s) and s[pos] == " ":
        pos += 1
    if pos >= len(s):
        raise err(source, line, "truncated INSERT statement (no closing ');')")
    return pos


def _sql_quoted(s: str, pos: int, source: str, line: int) -> tuple[str, int]:
    """The quoted string starting at s[pos] == "'" and the position after its closing quote. '' escapes
    a quote; test-backend-ops does not escape, so a quote is taken as closing only when followed by ','
    or ')' (or the end of the line)."""
    j = pos + 1
    buf = []
    while True:
        k = s.find("'", j)
        if k < 0:
            raise err(source, line, "truncated INSERT statement (unterminated string)")
        if k + 1 < len(s) and s[k + 1] == "'":
            buf.append(s[j : k + 1])
            j = k + 2
            continue
        rest = s[k + 1 :].lstrip(" ")
        if rest[:1] in (",", ")") or not rest:
            buf.append(s[j:k])
            return "".join(buf), k + 1
        buf.append(s[j : k + 1])  # an unescaped quote inside the value
        j = k + 1


def _sql_convert(col: str, typ: str, val: str | None, source: str, line: int) -> Any:
    if val is None:
        return None
    t = typ.upper()
    try:
        if t in ("INTEGER", "INT", "BIGINT"):
            return int(val)
        if t in ("REAL", "FLOAT", "DOUBLE"):
            return float(val)
    except ValueError:
        raise err(source, line, f"column {col}: expected {t}, got {snip(val, 40)}") from None
    return val


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


# ------------------------------------------------------------------------------------------- console


def parse_perf_console(text: str, source: str, *, partial: bool = False) -> list[PerfRecord]:
    """Parse the default console output of `test-backend-ops perf` (fallback for --output sql).

    Values are as rounded on screen: flops from e.g. ' 17.35 GFLOPS' (FLOP/s), extra['flop_per_run'] from
    '4.19 MFLOP/run'; memory-bound ops give memory_kb and bandwidth_gb_s instead. Unsupported cases give
    supported=False, time_us=0, n_runs=0. The backend name is the one of the enclosing 'Backend i/n:'
    section. Raises ParseError if the output ends before 'N/M backends passed' (unless partial=True) or
    a case line does not have the expected shape.
    """
    lines = split_lines(strip_interleaved_logs(text))
    last_content = last_content_line(lines)
    backend: str | None = None
    done = started = False
    out: list[PerfRecord] = []
    for i, raw in enumerate(lines):
        n = i + 1
        s = strip_ansi(raw)
        m = _BACKEND_INIT_RE.match(s)
        if _TESTING_RE.match(s) or m:
            started = True
            backend = m[3].strip() if m else backend
        elif _BACKENDS_PASSED_RE.match(s) and started:
            done = True
        elif backend is not None and not done:
            rec = _perf_line(s, backend, n, source)
            if rec is not None:
                out.append(rec)
            elif _CASE_START_RE.match(s) and n != last_content:
                raise err(source, n, f"garbled perf line, expected '  OP(params): N runs - T us/run - ...': {snip(s)}")
            elif _CASE_START_RE.match(s) and not partial:
                raise err(source, n, "truncated: output ends inside a perf case line")
    if not done and not partial:
        if not started:
            raise err(source, None, "truncated or not test-backend-ops output: no 'Testing N devices' line")
        raise err(source, last_content or None, "truncated: output ends before 'N/M backends passed'")
    return out


def _perf_line(s: str, backend: str, n: int, source: str) -> PerfRecord | None:
    """The record of a perf case line ('N runs - ...' or 'not supported'), None for other lines."""
    m = _PERF_LINE_RE.match(s)
    if m:
        flops = flop_per_run = None
        if m["fl"] is not None:
            flops = float(m["fl"]) * _SI[m["flu"]]
            flop_per_run = float(m["fpr"]) * _SI[m["fpru"]]
        return PerfRecord(
            backend_name=backend,
            op_name=m["op"],
            op_params=m["params"],
            time_us=sample(m["us"], source, n, "us/run"),
            n_runs=int(m["runs"]),
            flops=flops,
            bandwidth_gb_s=sample(m["gbs"], source, n, "GB/s") if m["gbs"] is not None else None,
            memory_kb=int(m["kb"]) if m["kb"] is not None else None,
            extra={"flop_per_run": flop_per_run} if flop_per_run is not None else {},
            line=n,
        )
    m = _PERF_NS_RE.match(s)
    if m:
        return PerfRecord(
            backend_name=backend,
            op_name=m["op"],
            op_params=m["params"],
            time_us=0.0,
            n_runs=0,
            supported=False,
            line=n,
        )
    return None
