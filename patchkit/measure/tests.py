"""bench step `test:<suite>`: test-backend-ops test mode on every variant."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable
from pathlib import Path

from patchkit import parsers, proc
from patchkit.errors import ParseError, ToolNotFound
from patchkit.measure import reuse
from patchkit.measure.tool import Bins, Built, completed_from_log, failure, run_logged
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step

# ---------------------------------------------------------------------------------------------
# test-backend-ops test


def run_tests(
    bundle: Bundle,
    bins: Iterable[Bins],
    *,
    expected: int = 0,
    suite: str,
    args: tuple[str, ...],
    backend: str,
    jobs: int = 0,
    timeout: float = 3600,
    cache: Path | None = None,
) -> Step:
    """test-backend-ops test mode on each variant; a variant whose (build key, arguments) ran before is
    reused from `cache` (patchkit.measure.reuse) instead of run again."""
    t0 = time.monotonic()
    per: dict[str, dict] = {}
    logs: list[str] = []
    cases: dict[str, dict[str, str]] = {}
    bins = iter(bins)
    first = next(bins, None)
    per_variant = None if bundle.replay or first is None else count_cases(first, backend, args)
    n = expected or 1
    total = per_variant * n if per_variant else None
    with Progress(f"test:{suite}", total=total, unit="case", what=f"{n} variants as they are built") as bar:
        for b in itertools.chain([first] if first else [], bins):
            bar.note(b.variant)
            argv = [b.exe("test-backend-ops"), "test", "-b", backend, *args]
            k = reuse.key(b.key, "test-backend-ops test", ("-b", backend, *args)) if cache and b.key else ""
            hit = reuse.lookup(cache, k) if k else None
            if hit is not None:
                log = bundle.raw_log(f"test-{suite}-{b.variant}")
                reuse.copy_into(*hit, log)
                done = completed_from_log(log)
                why = failure(done, None)
                print(f"[test:{suite}] {b.variant}: reused {hit[1]} (same build key and arguments)")
                bar.update(per_variant or 0)
            else:
                if jobs:
                    argv += ["-j", str(jobs)]
                done, why, log = run_logged(
                    bundle,
                    f"test-{suite}-{b.variant}",
                    argv,
                    timeout=timeout,
                    on_line=_counter(bar, b.variant),
                    separate_stderr=True,
                )
            logs.append(bundle.rel(log))
            _record_variant(per, cases, b, done, why, log, bundle, backend)
            if hit is not None:
                per[b.variant]["reused_from"] = hit[1]
            elif k and done is not None and not why and per[b.variant]["status"] in ("ok", "fail"):
                reuse.store(cache, k, bundle, log)
    diff = {}
    ref = cases.get("base")
    if ref is not None:
        for v, cs in cases.items():
            if v == "base":
                continue
            diff[v] = {
                "new_failures": sorted(n for n, s in cs.items() if s == "fail" and ref.get(n) != "fail"),
                "fixed": sorted(n for n, s in cs.items() if s == "ok" and ref.get(n) == "fail"),
                "disappeared": sorted(set(ref) - set(cs)),
                "appeared": sorted(set(cs) - set(ref)),
            }
    statuses = [Status(e["status"]) for e in per.values()]
    if any(s == Status.ERROR for s in statuses) or any(s == Status.FAIL for s in statuses):
        overall = Status.FAIL
    elif statuses and all(s == Status.NOT_RUN for s in statuses):
        overall = Status.NOT_RUN
    elif any(s == Status.NOT_RUN for s in statuses):
        overall = Status.FAIL
    else:
        overall = Status.OK
    reason = "; ".join(f"{v}: {e['reason']}" for v, e in per.items() if e["reason"])
    return Step(
        name=f"test:{suite}",
        status=overall,
        reason=reason,
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={"suite": suite, "args": list(args), "backend": backend, "variants": per, "diff": diff},
    )


def _record_variant(per: dict, cases: dict, b: Bins, done, why: str, log, bundle: Bundle, backend: str) -> None:
    """One variant's test run as its entry in the step's data (and its case results in `cases`)."""
    entry: dict = {"log": bundle.rel(log), "seconds": round(done.seconds, 1) if done else 0.0}
    try:
        tr = parsers.parse_test_console(done.stdout if done else "", str(log), partial=bool(why))
    except ParseError as e:
        entry.update(status=Status.ERROR.value, reason=why or str(e), backends=[], n_ok=0, n_fail=0, n_not_supported=0)
        per[b.variant] = entry
        return
    backends = []
    for br in tr.backends:
        backends.append(
            {
                "name": br.name,
                "status": br.status,
                "tests_passed": br.tests_passed,
                "tests_total": br.tests_total,
                "failing": sorted({c.name for c in br.cases if c.status == "fail"} | set(br.failing_tests or [])),
            }
        )
    run_cases = [c for c in tr.cases if c.status in ("ok", "fail")]
    cases[b.variant] = {c.name: c.status for c in run_cases}
    if why:
        status, reason = Status.ERROR, why
    elif tr.status == "not_run":
        status, reason = Status.NOT_RUN, f"no test case ran on {backend} (skipped, unsupported or none matched)"
    elif tr.status == "ok" and done is not None and done.returncode == 0:
        status, reason = Status.OK, ""
    else:
        status, reason = Status.FAIL, f"{sum(1 for c in run_cases if c.status == 'fail')} failing cases"
    entry.update(
        status=status.value,
        reason=reason,
        backends=backends,
        n_ok=sum(1 for c in tr.cases if c.status == "ok"),
        n_fail=sum(1 for c in tr.cases if c.status == "fail"),
        n_not_supported=sum(1 for c in tr.cases if c.status == "not_supported"),
    )
    per[b.variant] = entry


def step(built: Built, opts: RunOptions, name: str) -> Step:
    """`test:<suite>`: the suite's test-backend-ops arguments from the recipe, plus the user's filter."""
    suite = name.split(":", 1)[1]
    wanted = set(opts.test.variants) or {s.name for s in built.states}
    sc = built.scope
    if sc is not None:  # --changed: the changed variants only (built in this run: waiting for them costs nothing)
        wanted = {v for v in wanted if sc.tests(v) and v not in built.same_code}
        if not wanted:
            return Step(name=name, status=Status.NOT_RUN, reason="--changed: no tested variant changed its code")
    bins = (b for b in built.variants.stream() if b.variant in wanted)  # each as soon as built
    step = run_tests(
        built.bundle,
        bins,
        expected=len(wanted),
        suite=suite,
        args=inputs(built, opts, name)["args"],
        backend=opts.device,
        jobs=opts.test.jobs,
        cache=built.ctx.ws.cache / "measure" if opts.reuse else None,
    )
    if built.same_code:
        step.data["same_code"] = dict(built.same_code)
    return step


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    """What the step's result depends on beyond the builds (a resumed run with other inputs is refused)."""
    suite = name.split(":", 1)[1]
    where = built.params(opts.test.filter)
    extra = ("-p", where) if where else ()
    return {"args": (*built.ctx.recipe.suites[suite], *extra)}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = old.data
    tested = [b for b in bins if b.variant in d.get("variants", {})] or bins
    return run_tests(bundle, tested, suite=d["suite"], args=tuple(d["args"]), backend=d["backend"])


_CASE_LINE = re.compile(r"^\s+[A-Z][A-Z0-9_]*\(.*\): ")


def count_cases(b: Bins, backend: str, args: tuple[str, ...]) -> int | None:
    """How many cases a test run will report: test-backend-ops' fast `support` mode, same selection."""
    try:
        done = proc.run([b.exe("test-backend-ops"), "support", "-b", backend, *args], echo=False, check=False)
    except ToolNotFound:
        return None
    n = sum(1 for ln in done.stdout.splitlines() if _CASE_LINE.match(ln))
    return n or None


def _counter(bar: Progress, variant: str):
    def on_line(line: str) -> None:
        if _CASE_LINE.match(line):
            bar.update(1)

    return on_line
