"""bench step `test:<suite>`: test-backend-ops test mode on every variant."""

from __future__ import annotations

import time

from patchkit import parse
from patchkit.errors import ParseError
from patchkit.measure.tool import Bins, Built, run_logged
from patchkit.options import RunOptions
from patchkit.results import Bundle, Status, Step

# ---------------------------------------------------------------------------------------------
# test-backend-ops test


def run_tests(
    bundle: Bundle,
    bins: list[Bins],
    *,
    suite: str,
    args: tuple[str, ...],
    backend: str,
    jobs: int = 0,
    timeout: float = 3600,
) -> Step:
    t0 = time.monotonic()
    per: dict[str, dict] = {}
    logs: list[str] = []
    cases: dict[str, dict[str, str]] = {}
    for b in bins:
        argv = [b.exe("test-backend-ops"), "test", "-b", backend, *args]
        if jobs:
            argv += ["-j", str(jobs)]
        done, why, log = run_logged(bundle, f"test-{suite}-{b.variant}", argv, timeout=timeout)
        logs.append(bundle.rel(log))
        entry: dict = {"log": bundle.rel(log), "seconds": round(done.seconds, 1) if done else 0.0}
        try:
            tr = parse.parse_test_console(done.stdout if done else "", str(log), partial=bool(why))
        except ParseError as e:
            entry.update(
                status=Status.ERROR.value, reason=why or str(e), backends=[], n_ok=0, n_fail=0, n_not_supported=0
            )
            per[b.variant] = entry
            continue
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


def step(built: Built, opts: RunOptions, name: str) -> Step:
    """`test:<suite>`: the suite's test-backend-ops arguments from the recipe, plus the user's filter."""
    suite = name.split(":", 1)[1]
    bins = [b for b in built.bins if b.variant in opts.test.variants] if opts.test.variants else list(built.bins)
    return run_tests(
        built.bundle,
        bins,
        suite=suite,
        args=inputs(built, opts, name)["args"],
        backend=opts.device,
        jobs=opts.test.jobs,
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    """What the step's result depends on beyond the builds (a resumed run with other inputs is refused)."""
    suite = name.split(":", 1)[1]
    extra = ("-p", opts.test.filter) if opts.test.filter else ()
    return {"args": (*built.ctx.recipe.suites[suite], *extra)}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = old.data
    tested = [b for b in bins if b.variant in d.get("variants", {})] or bins
    return run_tests(bundle, tested, suite=d["suite"], args=tuple(d["args"]), backend=d["backend"])
