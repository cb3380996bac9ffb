"""`test:<suite>`: test-backend-ops per variant and backend, failing cases and the diff against base."""

from __future__ import annotations

from patchkit.measure import test as test_data
from patchkit.measure.test import TestBackend, TestDiff
from patchkit.report.evidence import Evidence, StepState, Suite, TestData, TestRun, Tests, TestVariant
from patchkit.report.fmt import (
    DASH,
    Block,
    bullets,
    code,
    details,
    gpu_col,
    logs_line,
    not_run,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.part import Missing, Section, not_run_lines
from patchkit.report.runview import RunView, ordered
from patchkit.results.data import ABSENT

STEP = "test:"
DIFF_KEYS = ("new_failures", "fixed", "disappeared", "appeared")
HEADER = ["variant", "result", "backend", "backend result", "passed/total", "not supported", "failing"]


def _variant(run: RunView, name: str, x: test_data.TestVariant) -> TestVariant:
    return TestVariant(
        variant=name,
        status=x.status,
        reason=x.reason,
        log=run.log(x.log),
        seconds=x.seconds,
        n_ok=x.n_ok,
        n_fail=x.n_fail,
        n_not_supported=x.n_not_supported,
        backends=x.backends,
    )


def _run(run: RunView, suite: str, order: list[str]) -> TestRun:
    name = f"{STEP}{suite}"
    s = run.step(name)
    e = TestRun.of(run, name, s)
    if s is not None and s.data:
        d = test_data.TestData.from_step(s, run.where)
        hidden = set(run.same_code)
        vs = {k: v for k, v in (d.variants or {}).items() if k not in hidden}
        diff = {k: v for k, v in (d.diff or {}).items() if k not in hidden}
        e.measured = TestData(
            args=d.args or [],
            backend=None if d.backend is ABSENT else d.backend,
            variants=[_variant(run, v, vs[v]) for v in ordered(vs, order)],
            diff={v: diff[v] for v in ordered(diff, order)},
        )
    return e


def evidence(runs: list[RunView], order: list[str]) -> Tests:
    """Every suite any run has, with each run's result (absent where a run lacks it)."""
    suites = sorted({n.split(":", 1)[1] for r in runs for n in r.step_names if n.startswith(STEP)})
    out = Tests(suites=[Suite(suite=suite, runs=[_run(r, suite, order) for r in runs]) for suite in suites])
    if not suites:
        out.runs = [StepState(gpu=r.gpu, status="absent", reason=f"no `{STEP}*` step in this run") for r in runs]
    return out


def _variant_result(v: TestVariant) -> str:
    return "passed" if v.status == "ok" else state_label(v.status, v.reason)


def _passed(b: TestBackend) -> str:
    return DASH if b.tests_total is None else f"{b.tests_passed}/{b.tests_total}"


def _backend_result(b: TestBackend) -> str:
    return {
        "ok": "ok",
        "fail": "FAIL",
        "skipped": "skipped",
        "not_run": "not run (0 cases)",
        "incomplete": "incomplete",
    }.get(str(b.status), str(b.status))


def _rows(gpu: list[str], v: TestVariant) -> list[list[str]]:
    """One row per backend of a variant (one row of dashes if it has none)."""
    ns = DASH if v.n_not_supported is None else str(v.n_not_supported)
    if not v.backends:
        return [[*gpu, code(v.variant), _variant_result(v), DASH, DASH, DASH, ns, DASH]]
    rows = []
    for b in v.backends:
        ran = b.status not in ("skipped", "not_run")  # the variant's counts belong to the backend that ran
        rows.append(
            [
                *gpu,
                code(v.variant),
                _variant_result(v),
                b.name,
                _backend_result(b),
                _passed(b),
                ns if ran else DASH,
                str(len(b.failing)) if ran else DASH,
            ]
        )
    return rows


def _diff_line(pre: str, v: str, d: TestDiff) -> str:
    lists = {k: getattr(d, k) for k in DIFF_KEYS}
    parts = [f"{k.replace('_', ' ')} ({len(x)}): " + ", ".join(code(c) for c in x) for k, x in lists.items() if x]
    return f"{pre}{code(v)} vs `base`: " + (
        "; ".join(parts) if parts else "no new failures, no fixed, disappeared or appeared cases"
    )


def passed(v: TestVariant) -> str:
    """'3982/3982 passed' on the backend(s) that ran, or the variant's result."""
    ran = [b for b in v.backends if b.status in ("ok", "fail", "incomplete")]
    if v.status != "ok" and not ran:
        return _variant_result(v)
    counts = ", ".join(f"{_passed(b)}" + (f" on {b.name}" if len(ran) > 1 else "") for b in ran) or DASH
    return counts + (" passed" if v.status == "ok" else f" ({_variant_result(v)})")


def new_failures(d: TestDiff | None) -> str:
    if d is None:
        return ""
    n = len(d.new_failures)
    return "no new failures" if not n else f"{n} new failure{'s' if n > 1 else ''}"


def _gist(s: Suite) -> str:
    parts = []
    for e in s.runs:
        if e.measured is None:
            parts.append(state_label(e.status, e.reason))
            continue
        parts += [f"{v.variant} {passed(v)}" for v in e.measured.variants]
        news = [new_failures(d) for d in e.measured.diff.values()]
        if news:
            parts.append("; ".join(dict.fromkeys(news)))
    return f"{STEP}{s.suite}: " + ", ".join(parts)


def _suite(s: Suite, multi: bool) -> list[Block]:
    rows, logs, failing, diffs, notes = [], [], [], [], []
    for e in s.runs:
        pre = prefix(multi, e.gpu)
        logs += e.logs
        m = e.measured
        if m is None:
            notes.append(pre + state_label(e.status, e.reason))
            continue
        notes.append(
            pre + f"arguments {code(' '.join(m.args))}" + (f", backend {code(m.backend)}" if m.backend else "") + "."
        )
        if e.status in ("fail", "error"):
            notes.append(pre + "step result: " + state_label(e.status, e.reason))
        for v in m.variants:
            logs.append(v.log)
            rows += _rows(gpu_col(multi, e.gpu), v)
            failing += [f"{pre}{code(v.variant)} on {b.name}: {code(f)}" for b in v.backends for f in b.failing]
        diffs += [_diff_line(pre, v, d) for v, d in m.diff.items()]
    out = [text(n) for n in notes]
    if rows:
        out += [table([*gpu_col(multi, "GPU"), *HEADER], rows), logs_line(logs)]
    if failing:
        out += [text("Failing cases:"), bullets(failing)]
    if diffs:
        out += [text("Against base:"), bullets(diffs)]
    return [details(_gist(s), out)]


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    if not ev.tests.suites:
        return not_run(ev.tests.runs or [], multi)
    return [b for s in ev.tests.suites for b in _suite(s, multi)]


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    """test-backend-ops backends run, and the ones skipped or not run per suite, run and variant; the runs
    without a test step."""
    items: list[Missing] = []
    tested = [(s, e, v) for s in ev.tests.suites for e in s.runs for v in (e.measured.variants if e.measured else [])]
    ran = sorted({str(b.name) for _, _, v in tested for b in v.backends if b.status in ("ok", "fail")})
    if ran:
        items.append(Missing("backends", 0, "test-backend-ops backends run: " + ", ".join(ran) + " only."))
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for s, e, v in tested:
        for b in v.backends:
            if b.status in ("skipped", "not_run"):
                groups.setdefault((s.suite, e.gpu, str(b.name), b.status.replace("_", " ")), []).append(v.variant)
    for (suite, gpu, name, status), vs in groups.items():
        items.append(Missing("backends", 0, f"test:{suite} on {gpu}: backend {name} {status} ({', '.join(vs)})."))
    return items + not_run_lines("steps", "test:*", ev.tests.runs or [], nothing_measured=False)


SECTION = Section("test", STEP, "tests", "test-backend-ops", evidence, markdown, not_tested)
