"""`test-backend-ops test` (and grad) console output (tests/test-backend-ops.cpp, `console_printer`,
pinned base ggml-org/llama.cpp@0c1e57098)::

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
failing case (`[OP] ERR = x > y `, `[OP] NaN at index ...`, `sentinel mismatch: ...`) are printed while
the case runs, i.e. on the same line *before* `  OP(params): FAIL`; older builds printed them after the
`): ` (`[OP] NMSE = x > y FAIL`) and both placements are accepted.

The parser reads the log line by line into a `_Run` (the whole log) holding at most one open
`_Section` (a `Backend i/n` section), which becomes its `BackendRun` (checked against the section's
`N/M tests passed`) when the next section starts or the summary is reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from patchkit.errors import ParseError
from patchkit.parsers.common import (
    err,
    float_or_none,
    last_content_line,
    snip,
    split_lines,
    strip_ansi,
    strip_interleaved_logs,
)
from patchkit.parsers.records import BackendRun, TestCase, TestRun

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
_RESULT_TAIL_RE = re.compile(r"^(?P<d>(?:.*\s)?)(?P<st>OK|FAIL)$")
_NOT_SUPPORTED_RE = re.compile(r"^not supported(?: \[(?P<by>.*)\])?\s*$")
# what `test-backend-ops perf` prints after "  OP(params): " (console_printer, perf mode)
_PERF_RESULT_RE = re.compile(r"^\d+ runs - +\S+ us/run - ")
_ERRVAL_RE = re.compile(r"\[[^\]]*\] (?P<m>NMSE|ERR|MAA) = (?P<v>[-+0-9.eEinfa]+) > (?P<t>[-+0-9.eEinfa]+)")
_NAME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\((.*)\)$")


@dataclass
class _Run:
    source: str
    partial: bool
    last_content: int  # line number of the last non-empty line
    device_count: int | None = None
    backends: list[BackendRun] = field(default_factory=list)
    cur: _Section | None = None
    bp: tuple[int, int, int] | None = None  # backends passed, total, line
    overall: str | None = None
    noise: int = 0
    started: bool = False

    def close(self, *, complete: bool) -> None:
        if self.cur is not None:
            self.backends.append(_finish_section(self.cur, self.source, complete=complete))
            self.cur = None


def parse_test_console(text: str, source: str, *, partial: bool = False) -> TestRun:
    """Parse `test-backend-ops test [-o OP] [-b BACKEND] [-p REGEX]` console output (stdout+stderr).

    Raises ParseError when the output ends before the final `N/M backends passed` + `OK|FAIL` lines
    ("truncated"), or when it is inconsistent (garbled case lines, counts that do not add up), or when it
    is the console output of `test-backend-ops perf` (naming `--tool perf`). With partial=True a
    truncated log is returned with complete=False instead (garbled still raises).
    Lines that are not part of the format (backend init logs, the command echoed by patchkit.proc) are
    ignored and counted in noise_lines.
    """
    text = strip_interleaved_logs(text)
    lines = split_lines(text)
    run = _Run(source=source, partial=partial, last_content=last_content_line(lines))
    for i, raw in enumerate(lines):
        _feed(run, i + 1, strip_ansi(raw))
    return _finish_run(run, text)


# ------------------------------------------------------------------------------------ line by line


def _feed(run: _Run, n: int, s: str) -> None:
    if run.bp is not None:
        # After "N/M backends passed" only the final OK/FAIL (and noise) may follow.
        m = _FINAL_RE.match(s.strip())
        if m and run.overall is None:
            run.overall = m[1].lower()
        elif s.strip():
            run.noise += 1
        return
    if _run_line(run, n, s):
        return
    if run.cur is None:
        if run.started and _CASE_START_RE.match(s):
            raise err(run.source, n, f"garbled: case line outside a 'Backend i/n' section: {snip(s)}")
        if s.strip():
            run.noise += 1
        return
    _section_line(run, run.cur, n, s)


def _run_line(run: _Run, n: int, s: str) -> bool:
    """The lines that frame the sections: 'Testing N devices', 'Backend i/n: X', 'N/M backends passed'."""
    m = _TESTING_RE.match(s)
    if m:
        if run.started:
            raise err(run.source, n, "garbled: a second 'Testing N devices' line")
        run.started = True
        run.device_count = int(m[1])
        return True
    m = _BACKEND_INIT_RE.match(s)
    if m:
        run.close(complete=True)
        run.started = True
        run.cur = _Section(int(m[1]), int(m[2]), m[3].strip(), n)
        return True
    m = _BACKENDS_PASSED_RE.match(s)
    if m and run.started:
        if run.cur is not None and m["pre"].strip():
            run.cur.orphan_details.append(m["pre"].strip())
        run.close(complete=True)
        run.bp = (int(m[2]), int(m[3]), n)
        return True
    return False


def _section_line(run: _Run, b: _Section, n: int, s: str) -> None:
    """A line inside a `Backend i/n` section."""
    if b.expect_skip_or_desc:  # the line right after "Backend i/n:"
        b.expect_skip_or_desc = False
        if s.startswith("  ") and not _DESC_RE.match(s) and not _MEM_RE.match(s) and s.strip():
            b.skip_reason = s.strip()
            return
    if not s.strip():
        b.in_failing = False
        return
    if b.skip_reason is not None:
        run.noise += 1
        return
    for handler in (_device_line, _status_line, _summary_line, _failing_line, _slice_line, _result_line, _case_line):
        if handler(run, b, n, s):
            return
    if _CASE_START_RE.match(s):
        if n == run.last_content:
            return  # cut inside the last case line: reported as truncated at the end
        raise err(run.source, n, f"garbled case line: {snip(s)}")
    run.noise += 1


def _device_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    m = _DESC_RE.match(s)
    if m and b.description is None and not b.cases:
        b.description = m[1]
        return True
    m = _MEM_RE.match(s)
    if m and b.mem is None and not b.cases:
        b.mem = (int(m[1]), int(m[2]))
        return True
    return False


def _status_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    m = _STATUS_RE.match(s)
    if not m:
        return False
    if m["pre"].strip():
        b.orphan_details.append(m["pre"].strip())
    b.reported = m["st"].lower()
    b.backend_name = m["name"]
    b.in_failing = False
    return True


def _summary_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    m = _SUMMARY_RE.match(s)
    if not m:
        return False
    if b.summary is not None:
        raise err(run.source, n, f"garbled: a second 'tests passed' line for backend {b.name}")
    if m["pre"].strip():
        if b.open_case is not None:
            b.open_case.details.append(m["pre"].strip())
        else:
            b.orphan_details.append(m["pre"].strip())
    b.summary = (int(m[2]), int(m[3]), n)
    return True


def _failing_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    """'Failing tests:' after the summary, and the indented names listed under it."""
    if _FAILING_HDR_RE.match(s) and b.summary is not None:
        b.in_failing = True
        return True
    if b.in_failing:
        if s.startswith("  ") and s.strip():
            b.failing.append((s.strip(), n))
            return True
        b.in_failing = False
    return False


def _slice_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    """Metal's FA vec slice tests, printed after the summary."""
    m = _SLICE_RE.match(s)
    if m:
        b.slice = (int(m[1]), int(m[2]))
        return True
    return s.startswith(("Running FA vec slice tests", "  FAIL fa_vec slice:"))


def _result_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    """The OK/FAIL that finishes a case whose line had no result (grad mode's stderr in between)."""
    if b.open_case is None or _CASE_RE.match(s):
        return False
    m = _RESULT_TAIL_RE.match(s.strip())
    if not m:
        return False
    oc, b.open_case = b.open_case, None
    b.cases.append(_make_case(oc.op, oc.params, m["st"].lower(), oc.details + _split_details(m["d"]), oc.line))
    return True


def _case_line(run: _Run, b: _Section, n: int, s: str) -> bool:
    m = _CASE_RE.match(s)
    if not m:
        return False
    if b.summary is not None:
        raise err(run.source, n, f"garbled: case line after the 'tests passed' line: {snip(s)}")
    details = _take_prefix(b, m["pre"].strip())
    if b.open_case is not None:
        oc, b.open_case = b.open_case, None
        b.cases.append(_make_case(oc.op, oc.params, "incomplete", oc.details, oc.line))
        if not run.partial:
            raise _no_result_error(run.source, oc)
    rest = m["rest"]
    parsed = _parse_case_rest(rest)
    if parsed is None:
        if _PERF_RESULT_RE.match(rest.strip()):
            raise err(
                run.source,
                n,
                "this is `test-backend-ops perf` console output, not test mode (the case line reads "
                "'N runs - T us/run'): use --tool perf",
            )
        # The result is not on this line: grad mode prints stderr text ("Error in X: ...\n") between
        # "  OP(params): " and "FAIL", and a crash leaves the case without a result. The next line must
        # finish it (_result_line); otherwise it is reported as garbled or truncated.
        b.open_case = _OpenCase(m["op"], m["params"], details + _split_details(rest), n)
        return True
    status, more, by = parsed
    b.cases.append(_make_case(m["op"], m["params"], status, details + more, n, unsupported_by=by))
    return True


def _take_prefix(b: _Section, pre: str) -> list[str]:
    """Text printed before '  OP(' on a case line: an allocation failure of an earlier case (kept for
    the cases only listed under 'Failing tests:'), the rest of an open case, or this case's details."""
    if not pre:
        return []
    if pre.startswith("failed to allocate"):
        b.orphan_details.append(pre)
    elif b.open_case is not None:
        b.open_case.details.append(pre)
    else:
        return [pre]
    return []


def _split_details(s: str) -> list[str]:
    s = s.strip()
    return [s] if s else []


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


# -------------------------------------------------------------------------------- a backend section


@dataclass
class _OpenCase:
    """A case line without a result yet."""

    op: str
    params: str
    details: list[str]
    line: int


class _Section:
    """What was read of one `Backend i/n` section so far."""

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
        self.open_case: _OpenCase | None = None


def _make_case(op: str, params: str, status: str, details: list[str], line: int, **kw: Any) -> TestCase:
    metric = value = threshold = None
    for d in details:
        m = _ERRVAL_RE.search(d)
        if m:
            metric, value, threshold = m["m"], float_or_none(m["v"]), float_or_none(m["t"])
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


def _no_result_error(source: str, oc: _OpenCase) -> ParseError:
    return err(source, oc.line, f"garbled: case {oc.op}({snip(oc.params, 50)}) has no OK/FAIL/not supported result")


def _finish_section(b: _Section, source: str, *, complete: bool) -> BackendRun:
    """The BackendRun of a section, its cases checked against its 'N/M tests passed' line."""
    cases = list(b.cases)
    if b.open_case is not None:
        if complete:
            raise _no_result_error(source, b.open_case)
        oc = b.open_case
        cases.append(_make_case(oc.op, oc.params, "incomplete", oc.details, oc.line))
    if b.summary is not None:
        cases += _check_summary(b, b.summary, cases, source)
    return BackendRun(
        index=b.index,
        total=b.total,
        name=b.name,
        status=_section_status(b, cases, source, complete=complete),
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


def _check_summary(b: _Section, summary: tuple[int, int, int], cases: list[TestCase], source: str) -> list[TestCase]:
    """Raise unless the printed cases add up to 'N/M tests passed'; returns the failing cases that
    only the 'Failing tests:' list names."""
    passed, total, sline = summary
    n_ok = sum(c.status == "ok" for c in cases)
    n_fail = sum(c.status in ("fail", "incomplete") for c in cases)
    if passed > total:
        raise err(source, sline, f"garbled summary: {passed}/{total} tests passed")
    if n_ok != passed:
        raise err(
            source,
            sline,
            f"garbled: summary says {passed}/{total} tests passed but the log "
            f"shows {n_ok} cases OK for backend {b.name}",
        )
    missing = (total - passed) - n_fail
    if missing == 0:
        return []
    # Cases that failed before printing their line (e.g. "failed to allocate tensors") appear only in
    # the "Failing tests:" list.
    printed = {c.name for c in cases if c.status != "ok"}
    extra = [(n, ln) for n, ln in b.failing if n not in printed]
    if missing < 0 or len(extra) != missing:
        raise err(
            source,
            sline,
            f"garbled: summary says {passed}/{total} tests passed but the log "
            f"shows {n_fail} failing cases for backend {b.name}",
        )
    return _listed_only(extra, list(b.orphan_details))


def _listed_only(extra: list[tuple[str, int]], orphans: list[str]) -> list[TestCase]:
    """Failing cases from their 'Failing tests:' names, each given the next orphaned detail."""
    out = []
    for n, ln in extra:
        m = _NAME_RE.match(n)
        op, params = (m[1], m[2]) if m else (n, "")
        det = [orphans.pop(0)] if orphans else []
        out.append(_make_case(op, params, "fail", det, ln, listed_only=True))
    return out


def _section_status(b: _Section, cases: list[TestCase], source: str, *, complete: bool) -> str:
    if b.skip_reason is not None:
        return "skipped"
    if b.reported == "fail" or any(c.status == "fail" for c in cases) or (b.summary and b.summary[0] < b.summary[1]):
        return "fail"
    if b.reported is None or any(c.status == "incomplete" for c in cases):
        if complete:
            raise err(source, b.line, f"backend {b.name}: no '  Backend {b.name}: OK|FAIL' line")
        return "incomplete"
    if b.summary is None:
        raise err(source, b.line, f"backend {b.name} reported OK without a 'N/M tests passed' line (garbled)")
    return "not_run" if b.summary[1] == 0 else "ok"


def _run_status(backends: list[BackendRun], overall: str | None, complete: bool) -> str:
    if any(b.status == "fail" for b in backends) or overall == "fail":
        return "fail"
    if not complete:
        return "incomplete"
    if any(b.status == "ok" for b in backends):
        return "ok"
    return "not_run"


# ------------------------------------------------------------------------------------- end of the log


def _finish_run(run: _Run, text: str) -> TestRun:
    source = run.source
    if not run.started:
        if run.partial:
            return TestRun(source=source, status="incomplete", complete=False, noise_lines=run.noise)
        if not text.strip():
            raise err(source, None, "truncated: empty output (expected 'Testing N devices')")
        raise err(source, None, "truncated or not test-backend-ops output: no 'Testing N devices' / 'Backend i/n' line")
    complete = run.bp is not None and run.overall is not None
    if not complete:
        _end_early(run)
    _check_totals(run, complete)
    return TestRun(
        source=source,
        status=_run_status(run.backends, run.overall, complete),
        complete=complete,
        device_count=run.device_count,
        backends=tuple(run.backends),
        backends_passed=run.bp[0] if run.bp else None,
        backends_total=run.bp[1] if run.bp else None,
        overall=run.overall,
        noise_lines=run.noise,
    )


def _end_early(run: _Run) -> None:
    """Output that ends before the final lines: 'truncated', or (partial) the open section closed."""
    last = run.last_content
    where = f"after line {last}" if last else ""
    what = "the final OK/FAIL line" if run.bp is not None else "'N/M backends passed'"
    if run.cur is not None and run.cur.open_case is not None:
        what += f" (case {run.cur.open_case.op} at line {run.cur.open_case.line} has no result)"
    if not run.partial:
        raise err(run.source, last or None, f"truncated: output ends {where} before {what}")
    run.close(complete=False)


def _check_totals(run: _Run, complete: bool) -> None:
    """Consistency of 'N/M backends passed' with 'Testing N devices' and the sections printed."""
    if run.bp is None:
        return
    passed, total, bline = run.bp
    source, backends = run.source, run.backends
    if run.device_count is not None and total != run.device_count:
        raise err(source, bline, f"garbled: {total} backends in the summary but 'Testing {run.device_count} devices'")
    if complete and len(backends) != total:
        raise err(
            source,
            bline,
            f"garbled: summary counts {total} backends but {len(backends)} 'Backend i/n' sections were printed",
        )
    n_pass = sum(b.status == "skipped" or b.reported == "ok" for b in backends)
    if complete and n_pass != passed:
        raise err(source, bline, f"garbled: summary says {passed}/{total} backends passed but {n_pass} sections passed")
