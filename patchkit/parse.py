"""Parsers for the output of llama.cpp's tools (pinned base ggml-org/llama.cpp@0c1e57098).

Text in, frozen dataclasses out: no subprocess, no file I/O except `read_log`. Every parser takes the
text and a `source` (the log path, or any name the user will recognise) and raises
`patchkit.errors.ParseError` with one line naming the source, the line number where known, and what was
expected. Fields are taken by name; added fields are kept (in `extra`) and missing required ones are
refused. Output that stops early is reported as truncated, never as passed.

Formats (read from the tool sources at the pinned base):

* `test-backend-ops test` console output (tests/test-backend-ops.cpp, `console_printer`)::

      Testing 1 devices

      Backend 1/1: CPU
        Device description: AMD EPYC
        Device memory: 24105 MB (24105 MB free)

        FLASH_ATTN_EXT(hsk=64,...,n_kv_max=0): \\033[1;32mOK\\033[0m
        36/36 tests passed
        Backend CPU: \\033[1;32mOK\\033[0m
      1/1 backends passed
      \\033[1;32mOK\\033[0m

  A backend left out by `-b` prints `Backend i/n: NAME` + `  Skipping` (without `-b`, the CPU device
  prints `  Skipping CPU backend`), and both are *counted as passed* by the tool. Error details of a
  failing case (`[OP] ERR = x > y `, `[OP] NaN at index ...`, `sentinel mismatch: ...`) are printed
  while the case runs, i.e. on the same line *before* `  OP(params): FAIL`; older builds printed them
  after the `): ` (`[OP] NMSE = x > y FAIL`) and both placements are accepted.
* `test-backend-ops perf --output sql`: `CREATE TABLE IF NOT EXISTS test_backend_ops (...)` then one
  `INSERT INTO test_backend_ops (cols...) VALUES ('v', ...);` per case, every value single-quoted.
* `test-backend-ops perf` console: `  OP(params):<pad>    N runs - T us/run - F xFLOP/run - R xFLOPS`
  or `... - K kB/run - B GB/s` for ops without a FLOP count.
* `llama-bench -o json` / `-o jsonl` (tools/llama-bench/llama-bench.cpp, `json_printer`,
  `jsonl_printer`).
* Nsight Compute `ncu --csv` (details page, one row per launch x metric).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from patchkit.errors import ParseError

__all__ = [
    "BACKEND_STATUSES",
    "CASE_STATUSES",
    "RUN_STATUSES",
    "BackendRun",
    "BenchRecord",
    "KernelLaunch",
    "KernelSummary",
    "PerfRecord",
    "TestCase",
    "TestRun",
    "parse_llama_bench_json",
    "parse_llama_bench_jsonl",
    "parse_ncu_csv",
    "parse_perf_console",
    "parse_perf_sql",
    "parse_test_console",
    "read_log",
    "summarize_kernels",
]


# --------------------------------------------------------------------------------------------- helpers

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def read_log(path: str | Path) -> str:
    """The text of a log file; bytes that are not UTF-8 are replaced (a crashed tool can leave some)."""
    return Path(path).read_text(encoding="utf-8", errors="replace")


def _strip_ansi(s: str) -> str:
    return _ANSI_RE.sub("", s)


def _snip(s: str, n: int = 80) -> str:
    """A short one-line rendering of a piece of input for an error message."""
    s = s.replace("\r", "").replace("\n", " ")
    if len(s) > n:
        s = s[: n - 3] + "..."
    return repr(s)


def _err(source: str, line: int | None, what: str) -> ParseError:
    where = f"{source}:{line}" if line is not None else source
    return ParseError(f"{where}: {what}".replace("\n", " "))


def _lines(text: str) -> list[str]:
    """Lines without terminators and without a trailing '\\r' (a log written through a pty has them)."""
    return [ln.rstrip("\r") for ln in text.split("\n")]


# ggml/llama log lines go to stderr, unbuffered, while the tool's results go to stdout, buffered:
# captured into one stream, a log line can land in the middle of a result line (seen on the H200:
# "...): ggml_backend_cuda_graph_compute: CUDA graph warmup complete\nnot supported [CUDA0]").
_INTERLEAVED = re.compile(r"(?<=[^\n])(?:ggml|llama|gguf)_[a-z0-9_]+: [^\n]*\n")


def strip_interleaved_logs(text: str) -> str:
    """Remove ggml/llama log lines that were written into the middle of another line."""
    while True:
        new = _INTERLEAVED.sub("", text)
        if new == text:
            return text
        text = new


class _AsDict:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


# ------------------------------------------------------------------------------ test-backend-ops test

CASE_STATUSES = ("ok", "fail", "not_supported", "skipped", "incomplete")
BACKEND_STATUSES = ("ok", "fail", "skipped", "not_run", "incomplete")
RUN_STATUSES = ("ok", "fail", "not_run", "incomplete")


@dataclass(frozen=True, kw_only=True)
class TestCase(_AsDict):
    """One `  OP(params): RESULT` line.

    status: "ok" | "fail" | "not_supported"; also "skipped" (grad mode's "skipping large tensors for
    speed") and "incomplete" (the line was started but its result never printed: only with partial=True).
    details: error fragments printed for the case, in order (e.g. "[FLASH_ATTN_EXT] ERR = 0.1 > 0.0005").
    err_metric/err_value/err_threshold: parsed from the first "[OP] NMSE|ERR|MAA = v > t" fragment.
    unsupported_by: for not_supported, what the tool printed in brackets (backend names or a reason).
    line: 1-based line number in the source; listed_only: True for a failing case that the tool only
    named in its "Failing tests:" list (e.g. "failed to allocate tensors" returns before the case line).
    """

    __test__ = False  # not a pytest class

    op: str
    params: str
    status: str
    details: tuple[str, ...] = ()
    err_metric: str | None = None
    err_value: float | None = None
    err_threshold: float | None = None
    unsupported_by: str | None = None
    line: int
    listed_only: bool = False

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"


@dataclass(frozen=True, kw_only=True)
class BackendRun(_AsDict):
    """One `Backend i/n: NAME` section.

    status: "ok" (ran >= 1 case, all passed and the tool said OK), "fail", "skipped" (the tool printed a
    skip reason), "not_run" (not skipped but zero cases were run: 0/0, or all cases unsupported), or
    "incomplete" (output ended inside the section; only with partial=True).
    reported: what the tool printed on `  Backend X: OK|FAIL` ("ok" / "fail"), None if not printed.
    tests_passed/tests_total: from `  N/M tests passed` (None when not printed).
    """

    index: int
    total: int
    name: str
    status: str
    skip_reason: str | None = None
    description: str | None = None
    memory_total_mb: int | None = None
    memory_free_mb: int | None = None
    cases: tuple[TestCase, ...] = ()
    tests_passed: int | None = None
    tests_total: int | None = None
    failing_tests: tuple[str, ...] = ()
    reported: str | None = None
    backend_name: str | None = None
    fa_vec_slice_run: int | None = None
    fa_vec_slice_failed: int | None = None
    line: int

    @property
    def n_ok(self) -> int:
        return sum(c.status == "ok" for c in self.cases)

    @property
    def n_fail(self) -> int:
        return sum(c.status == "fail" for c in self.cases)

    @property
    def n_not_supported(self) -> int:
        return sum(c.status == "not_supported" for c in self.cases)


@dataclass(frozen=True, kw_only=True)
class TestRun(_AsDict):
    """A whole `test-backend-ops test` (or grad) console log.

    status: "fail" if any backend failed or the tool said FAIL; else "incomplete" if the output ended
    early (partial=True only); else "ok" if at least one backend ran cases and passed; else "not_run"
    (every backend skipped or ran zero cases - the tool itself prints OK for that).
    overall: the tool's last line ("ok" / "fail"), None if missing.
    """

    __test__ = False

    source: str
    status: str
    complete: bool
    device_count: int | None = None
    backends: tuple[BackendRun, ...] = ()
    backends_passed: int | None = None
    backends_total: int | None = None
    overall: str | None = None
    noise_lines: int = 0

    @property
    def cases(self) -> tuple[TestCase, ...]:
        return tuple(c for b in self.backends for c in b.cases)

    def backend(self, name: str) -> BackendRun:
        for b in self.backends:
            if b.name == name or b.backend_name == name:
                return b
        raise KeyError(name)


_TESTING_RE = re.compile(r"^Testing (\d+) devices$")
_BACKEND_INIT_RE = re.compile(r"^Backend (\d+)/(\d+): (.+)$")
_DESC_RE = re.compile(r"^  Device description: (.*)$")
_MEM_RE = re.compile(r"^  Device memory: (\d+) MB \((\d+) MB free\)$")
# Case line: optional detail text printed earlier on the same line, then "  OP(params): rest".
_CASE_RE = re.compile(r"^(?P<pre>.*?)  (?P<op>[A-Za-z][A-Za-z0-9_]*)\((?P<params>.*)\): ?(?P<rest>.*)$")
_CASE_START_RE = re.compile(r"^  [A-Za-z][A-Za-z0-9_]*\(")
_SUMMARY_RE = re.compile(r"^(?P<pre>.*?)  (\d+)/(\d+) tests passed$")
_FAILING_HDR_RE = re.compile(r"^(?P<pre>.*?)Failing tests:$")
_STATUS_RE = re.compile(r"^(?P<pre>.*?)  Backend (?P<name>.+): (?P<st>OK|FAIL)$")
_BACKENDS_PASSED_RE = re.compile(r"^(?P<pre>.*?)(\d+)/(\d+) backends passed$")
_FINAL_RE = re.compile(r"^(OK|FAIL)$")
_SLICE_RE = re.compile(r"^  fa_vec \(Q,NE\) slice: (\d+) cases run, (\d+) failed$")
_ERRVAL_RE = re.compile(r"\[[^\]]*\] (?P<m>NMSE|ERR|MAA) = (?P<v>[-+0-9.eEinfa]+) > (?P<t>[-+0-9.eEinfa]+)")
_RESULT_TAIL_RE = re.compile(r"^(?P<d>(?:.*\s)?)(?P<st>OK|FAIL)$")
_NOT_SUPPORTED_RE = re.compile(r"^not supported(?: \[(?P<by>.*)\])?\s*$")


def _float_or_none(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


class _BackendBuilder:
    def __init__(self, index: int, total: int, name: str, line: int):
        self.index, self.total, self.name, self.line = index, total, name, line
        self.skip_reason: str | None = None
        self.expect_skip_or_desc = True  # the line right after "Backend i/n:"
        self.description: str | None = None
        self.mem: tuple[int, int] | None = None
        self.cases: list[TestCase] = []
        self.summary: tuple[int, int, int] | None = None  # passed, total, line
        self.failing: list[tuple[str, int]] = []
        self.in_failing = False
        self.orphan_details: list[str] = []
        self.reported: str | None = None
        self.backend_name: str | None = None
        self.slice: tuple[int, int] | None = None
        self.open_case: dict[str, Any] | None = None  # a case line without a result yet


def _split_details(s: str) -> list[str]:
    s = s.strip()
    return [s] if s else []


def _make_case(op: str, params: str, status: str, details: list[str], line: int, **kw: Any) -> TestCase:
    metric = value = threshold = None
    for d in details:
        m = _ERRVAL_RE.search(d)
        if m:
            metric, value, threshold = m["m"], _float_or_none(m["v"]), _float_or_none(m["t"])
            break
    return TestCase(
        op=op,
        params=params,
        status=status,
        details=tuple(details),
        err_metric=metric,
        err_value=value,
        err_threshold=threshold,
        line=line,
        **kw,
    )


def _parse_case_rest(rest: str) -> tuple[str, list[str], str | None] | None:
    """(status, details, unsupported_by) from the text after "): ", or None when unrecognised."""
    rest = rest.strip()
    m = _NOT_SUPPORTED_RE.match(rest)
    if m:
        return "not_supported", [], m["by"]
    if rest == "skipping large tensors for speed":
        return "skipped", [], None
    for word, status in (("OK", "ok"), ("FAIL", "fail")):
        if rest == word or rest.endswith(" " + word):
            return status, _split_details(rest[: -len(word)]), None
    return None


def _finish_backend(b: _BackendBuilder, source: str, *, complete: bool) -> BackendRun:
    cases = list(b.cases)
    if b.open_case is not None:
        oc = b.open_case
        if complete:
            raise _err(
                source,
                oc["line"],
                f"garbled: case {oc['op']}({_snip(oc['params'], 50)}) has no OK/FAIL/not supported result",
            )
        cases.append(_make_case(oc["op"], oc["params"], "incomplete", oc["details"], oc["line"]))
    if b.summary is not None:
        passed, total, sline = b.summary
        n_ok = sum(c.status == "ok" for c in cases)
        n_fail = sum(c.status in ("fail", "incomplete") for c in cases)
        if passed > total:
            raise _err(source, sline, f"garbled summary: {passed}/{total} tests passed")
        if n_ok != passed:
            raise _err(
                source,
                sline,
                f"garbled: summary says {passed}/{total} tests passed but the log "
                f"shows {n_ok} cases OK for backend {b.name}",
            )
        missing = (total - passed) - n_fail
        if missing > 0:
            # Cases that failed before printing their line (e.g. "failed to allocate tensors") appear
            # only in the "Failing tests:" list.
            printed = {c.name for c in cases if c.status != "ok"}
            extra = [(n, ln) for n, ln in b.failing if n not in printed]
            if len(extra) != missing:
                raise _err(
                    source,
                    sline,
                    f"garbled: summary says {passed}/{total} tests passed but the log "
                    f"shows {n_fail} failing cases for backend {b.name}",
                )
            orphans = list(b.orphan_details)
            for n, ln in extra:
                m = re.match(r"^([A-Za-z][A-Za-z0-9_]*)\((.*)\)$", n)
                op, params = (m[1], m[2]) if m else (n, "")
                det = [orphans.pop(0)] if orphans else []
                cases.append(_make_case(op, params, "fail", det, ln, listed_only=True))
        elif missing < 0:
            raise _err(
                source,
                sline,
                f"garbled: summary says {passed}/{total} tests passed but the log "
                f"shows {n_fail} failing cases for backend {b.name}",
            )
    # Derive the status.
    any_fail = any(c.status == "fail" for c in cases)
    if b.skip_reason is not None:
        status = "skipped"
    elif b.reported == "fail" or any_fail or (b.summary is not None and b.summary[0] < b.summary[1]):
        status = "fail"
    elif b.reported is None or any(c.status == "incomplete" for c in cases):
        if complete:
            raise _err(source, b.line, f"backend {b.name}: no '  Backend {b.name}: OK|FAIL' line")
        status = "incomplete"
    elif b.summary is None:
        raise _err(source, b.line, f"backend {b.name} reported OK without a 'N/M tests passed' line (garbled)")
    elif b.summary[1] == 0:
        status = "not_run"
    else:
        status = "ok"
    return BackendRun(
        index=b.index,
        total=b.total,
        name=b.name,
        status=status,
        skip_reason=b.skip_reason,
        description=b.description,
        memory_total_mb=b.mem[0] if b.mem else None,
        memory_free_mb=b.mem[1] if b.mem else None,
        cases=tuple(cases),
        tests_passed=b.summary[0] if b.summary else None,
        tests_total=b.summary[1] if b.summary else None,
        failing_tests=tuple(n for n, _ in b.failing),
        reported=b.reported,
        backend_name=b.backend_name,
        fa_vec_slice_run=b.slice[0] if b.slice else None,
        fa_vec_slice_failed=b.slice[1] if b.slice else None,
        line=b.line,
    )


def parse_test_console(text: str, source: str, *, partial: bool = False) -> TestRun:
    """Parse `test-backend-ops test [-o OP] [-b BACKEND] [-p REGEX]` console output (stdout+stderr).

    Raises ParseError when the output ends before the final `N/M backends passed` + `OK|FAIL` lines
    ("truncated"), or when it is inconsistent (garbled case lines, counts that do not add up). With
    partial=True a truncated log is returned with complete=False instead (garbled still raises).
    Lines that are not part of the format (backend init logs, the command echoed by patchkit.proc) are
    ignored and counted in noise_lines.
    """
    text = strip_interleaved_logs(text)
    lines = _lines(text)
    device_count: int | None = None
    backends: list[BackendRun] = []
    cur: _BackendBuilder | None = None
    bp: tuple[int, int, int] | None = None  # backends passed, total, line
    overall: str | None = None
    noise = 0
    started = False
    last_content = 0  # line number of the last non-empty line
    for i, raw in enumerate(lines):
        if raw.strip():
            last_content = i + 1

    def close(*, complete: bool) -> None:
        nonlocal cur
        if cur is not None:
            backends.append(_finish_backend(cur, source, complete=complete))
            cur = None

    for i, raw in enumerate(lines):
        n = i + 1
        s = _strip_ansi(raw)
        if bp is not None:
            # After "N/M backends passed" only the final OK/FAIL (and noise) may follow.
            m = _FINAL_RE.match(s.strip())
            if m and overall is None:
                overall = m[1].lower()
            elif s.strip():
                noise += 1
            continue
        m = _TESTING_RE.match(s)
        if m:
            if started:
                raise _err(source, n, "garbled: a second 'Testing N devices' line")
            started = True
            device_count = int(m[1])
            continue
        m = _BACKEND_INIT_RE.match(s)
        if m:
            close(complete=True)
            started = True
            cur = _BackendBuilder(int(m[1]), int(m[2]), m[3].strip(), n)
            continue
        m = _BACKENDS_PASSED_RE.match(s)
        if m and started:
            if cur is not None and m["pre"].strip():
                cur.orphan_details.append(m["pre"].strip())
            close(complete=True)
            bp = (int(m[2]), int(m[3]), n)
            continue
        if cur is None:
            if started and _CASE_START_RE.match(s):
                raise _err(source, n, f"garbled: case line outside a 'Backend i/n' section: {_snip(s)}")
            if s.strip():
                noise += 1
            continue

        # ---- inside a backend section
        b = cur
        if b.expect_skip_or_desc:
            b.expect_skip_or_desc = False
            if s.startswith("  ") and not _DESC_RE.match(s) and not _MEM_RE.match(s) and s.strip():
                b.skip_reason = s.strip()
                continue
        if not s.strip():
            b.in_failing = False
            continue
        if b.skip_reason is not None:
            noise += 1
            continue
        m = _DESC_RE.match(s)
        if m and b.description is None and not b.cases:
            b.description = m[1]
            continue
        m = _MEM_RE.match(s)
        if m and b.mem is None and not b.cases:
            b.mem = (int(m[1]), int(m[2]))
            continue
        m = _STATUS_RE.match(s)
        if m:
            if m["pre"].strip():
                b.orphan_details.append(m["pre"].strip())
            b.reported = m["st"].lower()
            b.backend_name = m["name"]
            b.in_failing = False
            continue
        m = _SUMMARY_RE.match(s)
        if m:
            if b.summary is not None:
                raise _err(source, n, f"garbled: a second 'tests passed' line for backend {b.name}")
            if m["pre"].strip():
                if b.open_case is not None:
                    b.open_case["details"].append(m["pre"].strip())
                else:
                    b.orphan_details.append(m["pre"].strip())
            b.summary = (int(m[2]), int(m[3]), n)
            continue
        m = _FAILING_HDR_RE.match(s)
        if m and b.summary is not None:
            b.in_failing = True
            continue
        if b.in_failing:
            if s.startswith("  ") and s.strip():
                b.failing.append((s.strip(), n))
                continue
            b.in_failing = False
        m = _SLICE_RE.match(s)
        if m:
            b.slice = (int(m[1]), int(m[2]))
            continue
        if s.startswith(("Running FA vec slice tests", "  FAIL fa_vec slice:")):
            continue
        if b.open_case is not None and not _CASE_RE.match(s):
            m = _RESULT_TAIL_RE.match(s.strip())
            if m:
                oc = b.open_case
                b.open_case = None
                b.cases.append(
                    _make_case(
                        oc["op"], oc["params"], m["st"].lower(), oc["details"] + _split_details(m["d"]), oc["line"]
                    )
                )
                continue
        m = _CASE_RE.match(s)
        if m:
            if b.summary is not None:
                raise _err(source, n, f"garbled: case line after the 'tests passed' line: {_snip(s)}")
            pre = m["pre"].strip()
            details: list[str] = []
            if pre:
                if pre.startswith("failed to allocate"):
                    b.orphan_details.append(pre)
                elif b.open_case is not None:
                    b.open_case["details"].append(pre)
                else:
                    details.append(pre)
            if b.open_case is not None:
                oc = b.open_case
                b.cases.append(_make_case(oc["op"], oc["params"], "incomplete", oc["details"], oc["line"]))
                b.open_case = None
                if not partial:
                    raise _err(
                        source,
                        oc["line"],
                        f"garbled: case {oc['op']}({_snip(oc['params'], 50)}) has no OK/FAIL/not supported result",
                    )
            rest = m["rest"]
            parsed = _parse_case_rest(rest)
            if parsed is None:
                # The result is not on this line: grad mode prints stderr text ("Error in X: ...\n") between
                # "  OP(params): " and "FAIL", and a crash leaves the case without a result. The next
                # line must finish it (see below); otherwise it is reported as garbled or truncated.
                b.open_case = {
                    "op": m["op"],
                    "params": m["params"],
                    "details": details + _split_details(rest),
                    "line": n,
                }
                continue
            status, more, by = parsed
            b.cases.append(_make_case(m["op"], m["params"], status, details + more, n, unsupported_by=by))
            continue
        if _CASE_START_RE.match(s):
            if n == last_content:
                continue  # cut inside the last case line: reported as truncated below
            raise _err(source, n, f"garbled case line: {_snip(s)}")
        noise += 1

    if not started:
        if partial:
            return TestRun(source=source, status="incomplete", complete=False, noise_lines=noise)
        if not text.strip():
            raise _err(source, None, "truncated: empty output (expected 'Testing N devices')")
        raise _err(
            source, None, "truncated or not test-backend-ops output: no 'Testing N devices' / 'Backend i/n' line"
        )
    complete = bp is not None and overall is not None
    if not complete:
        where = f"after line {last_content}" if last_content else ""
        what = "the final OK/FAIL line" if bp is not None else "'N/M backends passed'"
        if cur is not None and cur.open_case is not None:
            what += f" (case {cur.open_case['op']} at line {cur.open_case['line']} has no result)"
        if not partial:
            raise _err(source, last_content or None, f"truncated: output ends {where} before {what}")
        close(complete=False)
    # Consistency of the totals with what was printed.
    if bp is not None:
        passed, total, bline = bp
        if device_count is not None and total != device_count:
            raise _err(source, bline, f"garbled: {total} backends in the summary but 'Testing {device_count} devices'")
        if complete and len(backends) != total:
            raise _err(
                source,
                bline,
                f"garbled: summary counts {total} backends but {len(backends)} 'Backend i/n' sections were printed",
            )
        n_pass = sum(b.status == "skipped" or b.reported == "ok" for b in backends)
        if complete and n_pass != passed:
            raise _err(
                source, bline, f"garbled: summary says {passed}/{total} backends passed but {n_pass} sections passed"
            )
    if any(b.status == "fail" for b in backends) or overall == "fail":
        status = "fail"
    elif not complete:
        status = "incomplete"
    elif any(b.status == "ok" for b in backends):
        status = "ok"
    else:
        status = "not_run"
    return TestRun(
        source=source,
        status=status,
        complete=complete,
        device_count=device_count,
        backends=tuple(backends),
        backends_passed=bp[0] if bp else None,
        backends_total=bp[1] if bp else None,
        overall=overall,
        noise_lines=noise,
    )


# ------------------------------------------------------------------------------ test-backend-ops perf


@dataclass(frozen=True, kw_only=True)
class PerfRecord(_AsDict):
    """One perf case. time_us is the mean time per run; flops in FLOP/s and bandwidth_gb_s in GiB/s as
    the tool computes them (0/None when not applicable); memory_kb per run. `supported` False: the
    backend does not support the case (time_us is then 0). extra: every other column by name (sql), or
    console-only values (console: flop_per_run)."""

    backend_name: str
    op_name: str
    op_params: str
    time_us: float
    n_runs: int
    supported: bool = True
    flops: float | None = None
    bandwidth_gb_s: float | None = None
    memory_kb: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int

    @property
    def name(self) -> str:
        return f"{self.op_name}({self.op_params})"


_SQL_REQUIRED = ("backend_name", "op_name", "op_params", "time_us", "n_runs")
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


def _sql_values(s: str, pos: int, source: str, line: int) -> tuple[list[str | None], int]:
    """Values of `VALUES (` ... `)` starting at pos (just after the '('): quoted strings ('' escapes a
    quote; test-backend-ops does not escape, so a quote is taken as closing only when followed by ',' or
    ')'), bare numbers or NULL. Returns the values and the position after ')'."""
    vals: list[str | None] = []
    n = len(s)
    while True:
        while pos < n and s[pos] == " ":
            pos += 1
        if pos >= n:
            raise _err(source, line, "truncated INSERT statement (no closing ');')")
        if s[pos] == "'":
            j = pos + 1
            buf = []
            while True:
                k = s.find("'", j)
                if k < 0:
                    raise _err(source, line, "truncated INSERT statement (unterminated string)")
                if k + 1 < n and s[k + 1] == "'":
                    buf.append(s[j : k + 1])
                    j = k + 2
                    continue
                rest = s[k + 1 :].lstrip(" ")
                if rest[:1] in (",", ")") or not rest:
                    buf.append(s[j:k])
                    pos = k + 1
                    break
                buf.append(s[j : k + 1])  # an unescaped quote inside the value
                j = k + 1
            vals.append("".join(buf))
        else:
            m = _SQL_BARE_RE.match(s, pos)
            if not m:
                raise _err(source, line, f"garbled INSERT values near {_snip(s[pos : pos + 30])}")
            tok = m.group(0)
            vals.append(None if tok.upper() == "NULL" else tok)
            pos = m.end()
        while pos < n and s[pos] == " ":
            pos += 1
        if pos >= n:
            raise _err(source, line, "truncated INSERT statement (no closing ');')")
        if s[pos] == ",":
            pos += 1
            continue
        if s[pos] == ")":
            return vals, pos + 1
        raise _err(source, line, f"garbled INSERT values near {_snip(s[pos : pos + 30])}")


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
        raise _err(source, line, f"column {col}: expected {t}, got {_snip(val, 40)}") from None
    return val


def parse_perf_sql(text: str, source: str) -> list[PerfRecord]:
    """Parse `test-backend-ops perf ... --output sql`: the INSERT statements, by their column list.

    Required columns: backend_name, op_name, op_params, time_us, n_runs. Types come from the CREATE TABLE
    in the text when present (else the types test-backend-ops declares). supported/flops/bandwidth_gb_s/
    memory_kb become fields; all other columns (test_time, build_commit, device_description, ...) go to
    `extra`. Lines that are not SQL (backend logs, 'failed to allocate tensors') are ignored.
    Raises ParseError when no SQL is found at all, on a truncated/garbled INSERT, on a missing required
    column, or when a row is not a perf result (test_mode other than 'perf').
    """
    text = strip_interleaved_logs(text)
    types: dict[str, str] = {}
    in_create = False
    seen_sql = False
    records: list[PerfRecord] = []
    lines = _lines(text)
    last_content = max((i + 1 for i, ln in enumerate(lines) if ln.strip()), default=0)
    for i, raw in enumerate(lines):
        n = i + 1
        s = raw
        if in_create:
            if s.strip().startswith(");"):
                in_create = False
                continue
            m = _SQL_COL_RE.match(s)
            if m:
                types[m[1]] = m[2]
                continue
            if n == last_content:
                raise _err(source, n, "truncated: output ends inside CREATE TABLE")
            raise _err(source, n, f"garbled CREATE TABLE column, expected 'name TYPE,': {_snip(s)}")
        m = _CREATE_RE.search(s)
        if m:
            seen_sql = in_create = True
            types = {}
            continue
        k = s.find("INSERT INTO ")
        if k < 0:
            continue
        seen_sql = True
        m = _INSERT_RE.match(s, k)
        if not m:
            raise _err(source, n, f"garbled or truncated INSERT statement: {_snip(s[k:])}")
        cols = [c.strip() for c in m[2].split(",")]
        vals, end = _sql_values(s, m.end(), source, n)
        if not s[end:].lstrip().startswith(";"):
            raise _err(source, n, "truncated INSERT statement (no ';' after the values)")
        if len(vals) != len(cols):
            raise _err(source, n, f"garbled INSERT: {len(cols)} columns but {len(vals)} values")
        for req in _SQL_REQUIRED:
            if req not in cols:
                raise _err(source, n, f"INSERT lacks required column '{req}'")
        row = {
            c: _sql_convert(c, types.get(c, _SQL_KNOWN_TYPES.get(c, "TEXT")), v, source, n) for c, v in zip(cols, vals)
        }
        mode = row.get("test_mode")
        if mode is not None and mode != "perf":
            raise _err(source, n, f"not a perf result (test_mode '{mode}')")
        for req in _SQL_REQUIRED:
            if row[req] is None:
                raise _err(source, n, f"required column '{req}' is NULL")
        sup = row.get("supported")
        rec = PerfRecord(
            backend_name=str(row["backend_name"]),
            op_name=str(row["op_name"]),
            op_params=str(row["op_params"]),
            time_us=float(row["time_us"]),
            n_runs=int(row["n_runs"]),
            supported=bool(int(sup)) if sup is not None else True,
            flops=_opt_float(row.get("flops")),
            bandwidth_gb_s=_opt_float(row.get("bandwidth_gb_s")),
            memory_kb=int(row["memory_kb"]) if row.get("memory_kb") is not None else None,
            extra={
                c: v
                for c, v in row.items()
                if c not in _SQL_REQUIRED and c not in ("supported", "flops", "bandwidth_gb_s", "memory_kb")
            },
            line=n,
        )
        records.append(rec)
    if in_create:
        raise _err(source, None, "truncated: output ends inside CREATE TABLE")
    if not seen_sql:
        raise _err(
            source,
            None,
            "no SQL found (expected 'CREATE TABLE test_backend_ops' / 'INSERT INTO "
            "test_backend_ops'); empty or truncated output, or not --output sql",
        )
    return records


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "": 1.0}
_PERF_LINE_RE = re.compile(
    r"^  (?P<op>[A-Za-z][A-Za-z0-9_]*)\((?P<params>.*)\): +(?P<runs>\d+) runs - +(?P<us>[0-9.eE+-]+|inf|nan) us/run - +"
    r"(?:(?P<fpr>[0-9.]+) (?P<fpru>[kMGT]?)FLOP/run - +(?P<fl>[0-9.]+) (?P<flu>[kMGT]?)FLOPS"
    r"|(?P<kb>\d+) kB/run - +(?P<gbs>[0-9.]+|inf|nan) GB/s)\s*$"
)
_PERF_NS_RE = re.compile(r"^  (?P<op>[A-Za-z][A-Za-z0-9_]*)\((?P<params>.*)\): not supported\s*$")


def parse_perf_console(text: str, source: str, *, partial: bool = False) -> list[PerfRecord]:
    """Parse the default console output of `test-backend-ops perf` (fallback for --output sql).

    Values are as rounded on screen: flops from e.g. ' 17.35 GFLOPS' (FLOP/s), extra['flop_per_run'] from
    '4.19 MFLOP/run'; memory-bound ops give memory_kb and bandwidth_gb_s instead. Unsupported cases give
    supported=False, time_us=0, n_runs=0. The backend name is the one of the enclosing 'Backend i/n:'
    section. Raises ParseError if the output ends before 'N/M backends passed' (unless partial=True) or
    a case line does not have the expected shape.
    """
    text = strip_interleaved_logs(text)
    lines = _lines(text)
    backend: str | None = None
    done = False
    started = False
    out: list[PerfRecord] = []
    last_content = max((i + 1 for i, ln in enumerate(lines) if ln.strip()), default=0)
    for i, raw in enumerate(lines):
        n = i + 1
        s = _strip_ansi(raw)
        if _TESTING_RE.match(s):
            started = True
            continue
        m = _BACKEND_INIT_RE.match(s)
        if m:
            started = True
            backend = m[3].strip()
            continue
        if _BACKENDS_PASSED_RE.match(s) and started:
            done = True
            continue
        if backend is None or done:
            continue
        m = _PERF_LINE_RE.match(s)
        if m:
            flops = flop_per_run = None
            if m["fl"] is not None:
                flops = float(m["fl"]) * _SI[m["flu"]]
                flop_per_run = float(m["fpr"]) * _SI[m["fpru"]]
            out.append(
                PerfRecord(
                    backend_name=backend,
                    op_name=m["op"],
                    op_params=m["params"],
                    time_us=float(m["us"]),
                    n_runs=int(m["runs"]),
                    flops=flops,
                    bandwidth_gb_s=float(m["gbs"]) if m["gbs"] is not None else None,
                    memory_kb=int(m["kb"]) if m["kb"] is not None else None,
                    extra={"flop_per_run": flop_per_run} if flop_per_run is not None else {},
                    line=n,
                )
            )
            continue
        m = _PERF_NS_RE.match(s)
        if m:
            out.append(
                PerfRecord(
                    backend_name=backend,
                    op_name=m["op"],
                    op_params=m["params"],
                    time_us=0.0,
                    n_runs=0,
                    supported=False,
                    line=n,
                )
            )
            continue
        if _CASE_START_RE.match(s):
            if n == last_content and not partial:
                raise _err(source, n, "truncated: output ends inside a perf case line")
            if n == last_content:
                continue
            raise _err(source, n, f"garbled perf line, expected '  OP(params): N runs - T us/run - ...': {_snip(s)}")
    if not done:
        if not started and not partial:
            raise _err(source, None, "truncated or not test-backend-ops output: no 'Testing N devices' line")
        if not partial:
            raise _err(source, last_content or None, "truncated: output ends before 'N/M backends passed'")
    return out


# ------------------------------------------------------------------------------------------- llama-bench

_BENCH_REQUIRED: dict[str, tuple[type, ...]] = {
    "model_type": (str,),
    "n_prompt": (int,),
    "n_gen": (int,),
    "n_depth": (int,),
    "type_k": (str,),
    "type_v": (str,),
    "flash_attn": (int, bool),
    "avg_ts": (int, float),
    "stddev_ts": (int, float),
    "samples_ts": (list,),
    "samples_ns": (list,),
}
_BENCH_OPTIONAL: dict[str, tuple[type, ...]] = {
    "model_filename": (str,),
    "build_commit": (str,),
    "build_number": (int,),
    "backends": (str,),
    "gpu_info": (str,),
    "cpu_info": (str,),
    "devices": (str,),
    "n_threads": (int,),
    "n_batch": (int,),
    "n_ubatch": (int,),
    "n_gpu_layers": (int,),
    "model_size": (int,),
    "model_n_params": (int,),
    "avg_ns": (int, float),
    "stddev_ns": (int, float),
    "test_time": (str,),
}


@dataclass(frozen=True, kw_only=True)
class BenchRecord(_AsDict):
    """One llama-bench test. flash_attn: -1 auto, 0 off, 1 on (old builds printed a bool: mapped to 0/1).
    samples_ns: nanoseconds per repetition; samples_ts: tokens/s per repetition. Fields the parser does
    not name are kept in `extra` (cpu_mask, split_mode, tensor_split, ...). The brief names model_filename
    OR model_type as the model key: model_type is required, model_filename is kept when present."""

    model_filename: str | None = None
    model_type: str
    n_prompt: int
    n_gen: int
    n_depth: int
    type_k: str
    type_v: str
    flash_attn: int
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...]
    samples_ns: tuple[int, ...]
    build_commit: str | None = None
    build_number: int | None = None
    backends: str | None = None
    gpu_info: str | None = None
    cpu_info: str | None = None
    devices: str | None = None
    n_threads: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    n_gpu_layers: int | None = None
    model_size: int | None = None
    model_n_params: int | None = None
    avg_ns: float | None = None
    stddev_ns: float | None = None
    test_time: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def test(self) -> str:
        """The test name as llama-bench's markdown table prints it: pp512, tg128, pp512+tg128, '... @ d4096'."""
        if self.n_prompt > 0 and self.n_gen == 0:
            name = f"pp{self.n_prompt}"
        elif self.n_gen > 0 and self.n_prompt == 0:
            name = f"tg{self.n_gen}"
        else:
            name = f"pp{self.n_prompt}+tg{self.n_gen}"
        if self.n_depth > 0:
            name += f" @ d{self.n_depth}"
        return name


def _is_type(v: Any, types: tuple[type, ...]) -> bool:
    if isinstance(v, bool) and bool not in types:
        return False
    return isinstance(v, types)


def _bench_record(obj: Any, source: str, line: int | None) -> BenchRecord:
    if not isinstance(obj, dict):
        raise _err(source, line, f"expected a JSON object per llama-bench test, got {type(obj).__name__}")
    vals: dict[str, Any] = {}
    for key, types in _BENCH_REQUIRED.items():
        if key not in obj:
            raise _err(source, line, f"llama-bench record lacks required field '{key}'")
        if not _is_type(obj[key], types):
            raise _err(source, line, f"llama-bench field '{key}': unexpected value {_snip(json.dumps(obj[key]), 40)}")
        vals[key] = obj[key]
    for key, types in _BENCH_OPTIONAL.items():
        if key in obj and obj[key] is not None:
            if not _is_type(obj[key], types):
                raise _err(
                    source, line, f"llama-bench field '{key}': unexpected value {_snip(json.dumps(obj[key]), 40)}"
                )
            vals[key] = obj[key]
    for key in ("samples_ts", "samples_ns"):
        if not all(_is_type(x, (int, float)) for x in vals[key]):
            raise _err(source, line, f"llama-bench field '{key}': expected a list of numbers")
    if len(vals["samples_ts"]) != len(vals["samples_ns"]):
        raise _err(
            source,
            line,
            f"llama-bench record: {len(vals['samples_ns'])} samples_ns but {len(vals['samples_ts'])} samples_ts",
        )
    vals["flash_attn"] = int(vals["flash_attn"])
    vals["avg_ts"] = float(vals["avg_ts"])
    vals["stddev_ts"] = float(vals["stddev_ts"])
    vals["samples_ts"] = tuple(float(x) for x in vals["samples_ts"])
    vals["samples_ns"] = tuple(int(x) for x in vals["samples_ns"])
    for key in ("avg_ns", "stddev_ns"):
        if key in vals:
            vals[key] = float(vals[key])
    known = set(_BENCH_REQUIRED) | set(_BENCH_OPTIONAL)
    extra = {k: v for k, v in obj.items() if k not in known}
    return BenchRecord(**vals, extra=extra, line=line)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_llama_bench_json(text: str, source: str) -> list[BenchRecord]:
    """Parse `llama-bench -o json` output, tolerating log text around and between the records.

    The array starts at the first line that is exactly '['; between records (and glued after a '}', as
    llama.cpp's stderr logs appear when captured with 2>&1) any line that does not start a JSON value is
    skipped. Raises ParseError 'truncated' when the array or a record is not closed, or naming the line
    of a record that is not valid JSON or lacks a required field.
    """
    start = None
    pos = 0
    for ln in text.splitlines(keepends=True):
        if ln.strip() == "[":
            start = pos + len(ln)
            break
        pos += len(ln)
    if start is None:
        if not text.strip():
            raise _err(source, None, "truncated: empty output (expected a llama-bench JSON array)")
        raise _err(source, None, "no llama-bench JSON array found (expected a line '['); truncated, or not -o json")
    dec = json.JSONDecoder()
    end_of_content = len(text.rstrip())
    out: list[BenchRecord] = []
    i = start
    n = len(text)
    expect_item = True  # after '[' or ','
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            raise _err(source, _line_of(text, n), "truncated: the JSON array is not closed (no ']')")
        c = text[i]
        if c == "]":
            break
        if c == "," and not expect_item:
            expect_item = True
            i += 1
            continue
        if c == "{":
            if not expect_item:
                raise _err(source, _line_of(text, i), "garbled JSON: missing ',' between records")
            try:
                obj, j = dec.raw_decode(text, i)
            except json.JSONDecodeError as e:
                closed = any(ln.strip() == "]" for ln in text[i:].splitlines())
                if e.pos >= end_of_content or not closed:
                    raise _err(
                        source,
                        _line_of(text, i),
                        "truncated: a llama-bench record is not closed (and the array has no ']')",
                    ) from None
                raise _err(source, e.lineno, f"garbled JSON in a llama-bench record: {e.msg}") from None
            out.append(_bench_record(obj, source, _line_of(text, i)))
            i = j
            expect_item = False
            continue
        # Log text: skip the rest of the line.
        k = text.find("\n", i)
        i = n if k < 0 else k + 1
    return out


def parse_llama_bench_jsonl(text: str, source: str) -> list[BenchRecord]:
    """Parse `llama-bench -o jsonl`: one JSON object per line; other lines (logs) are ignored.

    Raises ParseError on a line that starts with '{' but is not valid JSON ('truncated' when it is the
    last line), on a missing required field, and when no record at all is found.
    """
    lines = _lines(text)
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out: list[BenchRecord] = []
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s.startswith("{"):
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            if i == last:
                raise _err(source, i + 1, "truncated: the last llama-bench JSONL record is incomplete") from None
            raise _err(source, i + 1, f"garbled llama-bench JSONL record: {e.msg}") from None
        out.append(_bench_record(obj, source, i + 1))
    if not out:
        what = "empty output" if not text.strip() else "no llama-bench JSONL record found"
        raise _err(source, None, f"{what} (truncated, or not -o jsonl)")
    return out


# ------------------------------------------------------------------------------------- Nsight Compute


@dataclass(frozen=True, kw_only=True)
class KernelLaunch(_AsDict):
    """One profiled kernel launch from `ncu --csv`. duration_ns from gpu__time_duration.sum (converted to
    ns from its unit). grid/block: (x, y, z). metrics: every other metric by name (float when numeric,
    else the text), units: their units."""

    id: int
    kernel_name: str
    duration_ns: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    process_id: int | None = None
    stream: int | None = None
    device: int | None = None
    metrics: dict[str, float | str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    line: int


class KernelSummary(NamedTuple):
    name: str
    count: int
    total_ns: float
    share: float


_NCU_DURATION = "gpu__time_duration.sum"
_NCU_REQUIRED = ("ID", "Kernel Name", "Metric Name", "Metric Value")
_TIME_UNITS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def _ncu_number(v: str) -> float | None:
    v = v.strip()
    if _THOUSANDS_RE.match(v):
        v = v.replace(",", "")
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _dim3(v: str | None) -> tuple[int, int, int] | None:
    if not v:
        return None
    nums = re.findall(r"\d+", v)
    if len(nums) != 3:
        return None
    return (int(nums[0]), int(nums[1]), int(nums[2]))


def _opt_int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str, source: str) -> list[KernelLaunch]:
    """Parse Nsight Compute `ncu --csv --print-units base --metrics gpu__time_duration.sum,...` output.

    The expected layout (ncu's details page as CSV, one row per launch and metric) is::

        ==PROF== Connected to process 1234 (/path/test-backend-ops)
        ==PROF== Profiling "flash_attn_ext_f16" - 0: 0%....50%....100% - 1 pass
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",
            "Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
        "0","1234","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<...>(...)","1","7",
            "(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics",
            "gpu__time_duration.sum","ns","12,544"

    Columns are taken by name from the header row (the first line starting with '"ID",'); required:
    ID, Kernel Name, Metric Name, Metric Value. '==PROF==' / '==WARNING==' lines and the profiled
    program's own output are ignored. Rows are grouped per launch by (Process ID, ID). Values may use
    thousands separators. Every launch must carry gpu__time_duration.sum (time units ns/us/ms/s are
    converted to ns).

    NOTE: written from the documented format; the real fixture will be recorded on the H200 later.
    """
    lines = _lines(text)
    header: list[str] | None = None
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, ln in enumerate(lines):
        n = i + 1
        s = ln.strip()
        if header is None:
            if s.startswith('"ID",'):
                header = next(csv.reader([s]))
                for req in _NCU_REQUIRED:
                    if req not in header:
                        raise _err(source, n, f"ncu CSV header lacks required column '{req}'")
            continue
        if not s.startswith('"'):
            continue  # ==PROF== lines, program output
        try:
            row = next(csv.reader([s]))
        except csv.Error as e:
            raise _err(source, n, f"garbled ncu CSV row: {e}") from None
        if len(row) != len(header) or not s.endswith('"'):
            if i == last:
                raise _err(source, n, "truncated: the last ncu CSV row is incomplete")
            raise _err(source, n, f"garbled ncu CSV row: {len(row)} fields, header has {len(header)}")
        r = dict(zip(header, row))
        if r["ID"] == "ID":
            continue  # a repeated header (several reports concatenated)
        key = (r.get("Process ID", ""), r["ID"])
        g = groups.get(key)
        if g is None:
            if _opt_int(r["ID"]) is None:
                raise _err(source, n, f"ncu CSV: ID is not a number: {_snip(r['ID'], 30)}")
            g = groups[key] = {"row": r, "line": n, "metrics": {}, "units": {}, "duration": None}
        name, unit, value = r["Metric Name"], r.get("Metric Unit", ""), r["Metric Value"]
        if name == _NCU_DURATION:
            x = _ncu_number(value)
            if x is None:
                raise _err(source, n, f"ncu CSV: {_NCU_DURATION} is not a number: {_snip(value, 30)}")
            scale = _TIME_UNITS.get(unit.strip() or "ns")
            if scale is None:
                raise _err(source, n, f"ncu CSV: unknown time unit {_snip(unit, 20)} for {_NCU_DURATION}")
            g["duration"] = x * scale
        else:
            x = _ncu_number(value)
            g["metrics"][name] = x if x is not None else value
            if unit:
                g["units"][name] = unit
    if header is None:
        if not text.strip():
            raise _err(source, None, "truncated: empty output (expected ncu --csv output)")
        raise _err(
            source,
            None,
            "no ncu CSV header found (expected a line starting with '\"ID\",'); "
            "truncated, no kernel was profiled, or not --csv output",
        )
    out: list[KernelLaunch] = []
    for (_pid, _id), g in groups.items():
        r = g["row"]
        if g["duration"] is None:
            raise _err(
                source,
                g["line"],
                f"ncu launch ID {_id} ({_snip(r['Kernel Name'], 40)}) has no '{_NCU_DURATION}' metric",
            )
        out.append(
            KernelLaunch(
                id=int(_id),
                kernel_name=r["Kernel Name"],
                duration_ns=g["duration"],
                grid=_dim3(r.get("Grid Size")),
                block=_dim3(r.get("Block Size")),
                process_id=_opt_int(r.get("Process ID")),
                stream=_opt_int(r.get("Stream")),
                device=_opt_int(r.get("Device")),
                metrics=g["metrics"],
                units=g["units"],
                line=g["line"],
            )
        )
    return out


def summarize_kernels(launches: Iterable[KernelLaunch]) -> list[KernelSummary]:
    """Per kernel name: launch count, total duration (ns) and share of the total, largest total first
    (ties by name)."""
    acc: dict[str, list[float]] = {}
    for k in launches:
        a = acc.setdefault(k.kernel_name, [0, 0.0])
        a[0] += 1
        a[1] += k.duration_ns
    grand = sum(a[1] for a in acc.values())
    rows = [KernelSummary(name, int(a[0]), a[1], (a[1] / grand) if grand > 0 else 0.0) for name, a in acc.items()]
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows


_PERF_PRINT = re.compile(r"^[\d.]* ?[A-Z]? ?common_perf_print:", re.MULTILINE)


def completion_finished(log_text: str) -> bool:
    """Whether a llama-completion log holds its closing `common_perf_print:` lines: written after the
    generated text through the same (first in, first out) logger, so their presence means none of
    the text was lost at exit."""
    return _PERF_PRINT.search(log_text) is not None
