"""bench step `test:<suite>`: test-backend-ops test mode on every variant."""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from patchkit import parsers, proc
from patchkit.errors import ParseError, ResultsError, ToolNotFound
from patchkit.measure import reuse
from patchkit.measure import shards as sharding
from patchkit.measure.kind import ImportSpec, Resource, StepKind
from patchkit.measure.tool import Bins, Built, completed_from_log, failure, missing_options, run_logged
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step
from patchkit.results.data.base import ABSENT, Data, StepData
from patchkit.run.scope import both as scope_both

# ---------------------------------------------------------------------------------------------
# Its stored data (Step.data, the kind's StepData; docs/results-schema.md): test-backend-ops test mode per variant


@dataclass(kw_only=True)
class TestBackend(Data):
    """One backend's summary line of a variant's test processes (merged over the processes)."""

    __test__ = False  # not a pytest class
    name: str  # as test-backend-ops prints it ('CUDA0', 'CPU')
    status: str  # ok / fail / skipped / not_run, as test-backend-ops says it
    tests_passed: int | None  # None: the backend printed no count
    tests_total: int | None
    failing: list[str]  # the failing cases (their names), sorted


@dataclass(kw_only=True)
class TestVariant(Data):
    """One variant's test processes (one, or one per share of the cases with --test-procs) as one entry."""

    __test__ = False
    log: str  # the (first) process's log, relative to the run folder
    seconds: float  # the longest process
    status: str  # ok / fail / error / not_run (patchkit.results.Status)
    reason: str  # why not ok ('' when ok)
    backends: list[TestBackend]
    n_ok: int  # cases passed
    n_fail: int  # cases failed
    n_not_supported: int  # cases the backend does not support
    logs: list[str] = ABSENT  # every process's log (absent: one process)
    reused_from: str | list[str] = ABSENT  # the run(s) whose logs were reused (absent: none was)

    @property
    def unsupported_only(self) -> bool:
        """None of its cases ran because the backend supports none of them (base of a change that adds an op's
        support: CUDA0 reports every POOL_1D case "not supported" before recipes/pool1d-cuda's patch)."""
        return self.status == "not_run" and self.n_not_supported > 0 and not self.n_ok


@dataclass(kw_only=True)
class TestDiff(Data):
    """A variant's cases against base's."""

    __test__ = False
    new_failures: list[str]  # failing here, not failing at base
    fixed: list[str]  # passing here, failing at base
    disappeared: list[str]  # run at base, not here
    appeared: list[str]  # run here, not at base


@dataclass(kw_only=True)
class TestData(StepData):
    """test:<suite>. A step that did not run holds only `inputs` (or nothing)."""

    __test__ = False
    KIND = "test:"  # a prefix: one step per suite
    suite: str = ABSENT  # the recipe's suite
    args: list[str] = ABSENT  # test-backend-ops test's arguments (the suite's and the user's filter)
    backend: str = ABSENT  # test-backend-ops -b
    variants: dict[str, TestVariant] = ABSENT  # variant -> its result
    diff: dict[str, TestDiff] = ABSENT  # variant -> its cases against base's ({} when base was not tested)
    shards: list[str] = ABSENT  # the -p regex of each process (--test-procs; absent: one process)
    same_code: dict[str, str] = ABSENT  # variants not tested since they compile to base's code: why


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
    procs: int = 1,
    shards: list[str] | None = None,
    timeout: float = 3600,
    cache: Path | None = None,
    jobs_default: bool = False,
) -> Step:
    """test-backend-ops test mode on each variant, in `procs` processes at once (patchkit.measure.shards;
    `shards`: the split a recorded step used); a process whose (build key, arguments) ran before is
    reused from `cache` (patchkit.measure.reuse) instead of run again."""
    t0 = time.monotonic()
    per: dict[str, TestVariant] = {}
    logs: list[str] = []
    cases: dict[str, dict[str, str]] = {}
    bins = iter(bins)
    first = next(bins, None)
    lack = missing_options(first, "test-backend-ops", _asked(jobs)) if first and not bundle.replay else ""
    if lack:  # a speed option the tool at this base lacks (-j): run without it, said once, never a failure
        asked = "the default " if jobs_default else ""
        print(f"test: {lack.split(':')[0]}: {asked}--test-jobs {jobs} is left out (it runs on its own threads)")
        jobs = 0
    listed = None if bundle.replay or first is None else list_cases(first, backend, args)
    if shards is None:
        shards = split_shards(listed or [], procs)
    per_variant = len(listed) if listed else None
    n = expected or 1
    total = per_variant * n if per_variant else None
    count = f"{per_variant} cases a variant" if per_variant else "cases"
    what = f"up to {n} variants, each as it is built (one that compiles to base's code is not tested)"
    run = _Runner(bundle, suite, args, shards, backend, jobs, timeout, cache)
    with Progress(f"test:{suite}", total=total, unit="case", what=what, count=count) as bar:
        with ThreadPoolExecutor(max_workers=max(1, len(shards))) as pool:
            queued = []
            for b in itertools.chain([first] if first else [], bins):
                bar.note(b.variant)
                queued.append((b, run.submit(pool, b, bar)))
            for b, futures in queued:
                runs = [f.result() for f in futures]
                logs += [bundle.rel(r.log) for r in runs]
                _record_variant(per, cases, b, runs, bundle, backend)
        ran = sum(len(c) for c in cases.values())
        bar.said(f"{ran} cases run: {len(per)} variant(s) ({', '.join(per) or 'none'})")
    diff = {}
    ref = cases.get("base")
    if ref is not None:
        for v, cs in cases.items():
            if v == "base":
                continue
            diff[v] = TestDiff(
                new_failures=sorted(n for n, s in cs.items() if s == "fail" and ref.get(n) != "fail"),
                fixed=sorted(n for n, s in cs.items() if s == "ok" and ref.get(n) == "fail"),
                disappeared=sorted(set(ref) - set(cs)),
                appeared=sorted(set(cs) - set(ref)),
            )
    overall = overall_status(per)
    reason = "; ".join(f"{v}: {e.reason}" for v, e in per.items() if e.reason)
    return Step(
        name=f"test:{suite}",
        status=overall,
        reason=reason,
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=TestData(
            suite=suite, args=list(args), backend=backend, variants=per, diff=diff, shards=list(shards) or ABSENT
        ).to_dict(),
    )


TBO_SOURCE = "tests/test-backend-ops.cpp"
_PARSES_J = re.compile(r'strcmp\(\s*argv\[i\],\s*"-j"\s*\)')


def without_jobs_the_tool_lacks(opts: RunOptions, sources: dict[str, str | None]) -> RunOptions:
    """Before the builds: `opts` without --test-jobs where a variant's test-backend-ops source (variant ->
    the text of its tests/test-backend-ops.cpp; None: unknown) parses no -j (bases older than
    llama.cpp's -j, e.g. 0.3.16 and 0.3.17's), with one printed note; the usage text is checked again
    after the builds (run_tests)."""
    lack = [v for v, text in sources.items() if text is not None and not _PARSES_J.search(text)]
    if not opts.test.jobs or not lack:
        return opts
    asked = "the default " if opts.test.jobs_default else ""
    print(
        f"test: test-backend-ops of {', '.join(lack)} has no option -j ({TBO_SOURCE} parses none): "
        f"{asked}--test-jobs {opts.test.jobs} is left out (it runs on its own threads)"
    )
    return dataclasses.replace(opts, test=dataclasses.replace(opts.test, jobs=0))


def _asked(jobs: int) -> dict[str, str]:
    """The options of test mode a test-backend-ops at an older base may lack, and what asked for them."""
    return {"-j": f"--test-jobs {jobs} passes it; run without --test-jobs"} if jobs else {}


@dataclass(frozen=True)
class _Runner:
    """A suite's test processes: each variant's share of the cases (one process when not split), queued
    on one pool of `--test-procs` slots as the variant is built, so that a slot freed by one variant's
    shorter share starts the next variant's at once (measured on the H100, 2026-12-06: base's two shares
    ended 17 s apart, and the series' end waited for the later one)."""

    bundle: Bundle
    suite: str
    args: tuple[str, ...]
    shards: list[str]
    backend: str
    jobs: int
    timeout: float
    cache: Path | None

    def submit(self, pool: ThreadPoolExecutor, b: Bins, bar: Progress) -> list[Future[_Process]]:
        parts = [_shard_args(self.args, p) for p in self.shards] or [self.args]
        n = len(parts)
        names = [f"test-{self.suite}-{b.variant}" + (f"-{i + 1}of{n}" if n > 1 else "") for i in range(n)]
        each = self.jobs // n or self.jobs
        group = proc.current_group()  # the workers' processes belong to this thread's group (patchkit.run.pipeline)

        def one(nm: str, a: tuple[str, ...]) -> _Process:
            with proc.group(*group):
                return _one_process(self.bundle, b, nm, a, self.backend, each, self.timeout, self.cache, bar)

        return [pool.submit(one, nm, a) for nm, a in zip(names, parts)]


@dataclass(frozen=True)
class _Process:
    done: proc.Completed | None
    why: str
    log: Path
    reused_from: str = ""


def _shard_args(args: tuple[str, ...], pattern: str) -> tuple[str, ...]:
    """The suite's arguments with one process's share of the cases (its -p and the suite's together)."""
    rest, where = list(args), ""
    if "-p" in rest:
        i = rest.index("-p")
        where = rest[i + 1] if i + 1 < len(rest) else ""
        del rest[i : i + 2]
    return (*rest, "-p", scope_both(where, pattern))


def _one_process(
    bundle: Bundle, b: Bins, name: str, args: tuple[str, ...], backend: str, jobs: int, timeout: float, cache, bar
) -> _Process:
    """One test-backend-ops test process of a variant (or its reused log)."""
    f = reuse.finished(cache, b.key, "test-backend-ops test", ("-b", backend, *args))
    if (hit := f.take(bundle, name)) is not None:
        log, origin = hit
        done = completed_from_log(log)
        print(f"[{name}] reused {origin} (same build key and arguments)")
        bar.update(sum(1 for ln in done.stdout.splitlines() if _CASE_LINE.match(ln)))
        return _Process(done, failure(done, None), log, reused_from=origin)
    argv = [b.exe("test-backend-ops"), "test", "-b", backend, *args, *(["-j", str(jobs)] if jobs else [])]
    done, why, log = run_logged(
        bundle, name, argv, timeout=timeout, on_line=_counter(bar, b.variant), separate_stderr=True
    )
    if done is not None and not why and done.returncode in (0, 1):
        f.keep(bundle, log)
    return _Process(done, why, log)


def _record_variant(per: dict, cases: dict, b: Bins, runs: list[_Process], bundle: Bundle, backend: str) -> None:
    """A variant's test processes as one entry in the step's data (its case results in `cases`)."""
    parts = [_entry(r, bundle, backend) for r in runs]
    entries = [e for e, _ in parts]
    entry = entries[0] if len(entries) == 1 else _merge(entries)
    if len(runs) > 1:
        entry.logs = [bundle.rel(r.log) for r in runs]
    reused = [r.reused_from for r in runs if r.reused_from]
    if reused:
        entry.reused_from = reused[0] if len(reused) == 1 else reused
    cases[b.variant] = {k: v for _, c in parts for k, v in c.items()}
    per[b.variant] = entry


def _merge(entries: list[TestVariant]) -> TestVariant:
    """One variant's entries of several processes (each its share of the cases) as one."""
    rank = {Status.ERROR.value: 3, Status.FAIL.value: 2, Status.OK.value: 1, Status.NOT_RUN.value: 0}
    ran = [e for e in entries if e.status != Status.NOT_RUN.value] or entries
    status = max((e.status for e in ran), key=lambda st: rank[st])
    backends: dict[str, TestBackend] = {}
    for e in entries:
        for br in e.backends:
            m = backends.setdefault(br.name, dataclasses.replace(br, tests_passed=0, tests_total=0, failing=[]))
            if br.tests_total is not None:
                m.tests_passed = (m.tests_passed or 0) + (br.tests_passed or 0)
                m.tests_total = (m.tests_total or 0) + br.tests_total
            m.failing = sorted(set(m.failing) | set(br.failing))
            if rank.get(br.status, 0) > rank.get(m.status, 0) or m.status == "skipped":
                m.status = br.status
    return TestVariant(
        log=entries[0].log,
        seconds=max(e.seconds for e in entries),
        status=status,
        reason="; ".join(e.reason for e in entries if e.reason and e.status == status),
        backends=list(backends.values()),
        n_ok=sum(e.n_ok for e in entries),
        n_fail=sum(e.n_fail for e in entries),
        n_not_supported=sum(e.n_not_supported for e in entries),
    )


def overall_status(per: dict[str, TestVariant]) -> Status:
    """The suite's status from its variants': failed or errored anywhere is FAIL; no variant ran a case is
    NOT_RUN; a variant that ran nothing is FAIL, unless its backend supports none of the cases and neither
    did base's (the series adds the support later, or this variant is base): a variant that lost support
    base had fails."""
    statuses = [Status(e.status) for e in per.values()]
    if any(s in (Status.ERROR, Status.FAIL) for s in statuses):
        return Status.FAIL
    if statuses and all(s == Status.NOT_RUN for s in statuses):
        return Status.NOT_RUN
    base_lacks = "base" in per and per["base"].unsupported_only
    if any(e.status == Status.NOT_RUN.value and not (e.unsupported_only and base_lacks) for e in per.values()):
        return Status.FAIL
    return Status.OK


def _entry(r: _Process, bundle: Bundle, backend: str) -> tuple[TestVariant, dict[str, str]]:
    """One test process as an entry of the step's data, and its case results."""
    done, why, log = r.done, r.why, r.log
    at = {"log": bundle.rel(log), "seconds": round(done.seconds, 1) if done else 0.0}
    try:
        tr = parsers.parse_test_console(done.stdout if done else "", str(log), partial=bool(why))
    except ParseError as e:
        no = {"backends": [], "n_ok": 0, "n_fail": 0, "n_not_supported": 0}
        return TestVariant(**at, status=Status.ERROR.value, reason=why or str(e), **no), {}
    backends = [
        TestBackend(
            name=br.name,
            status=br.status,
            tests_passed=br.tests_passed,
            tests_total=br.tests_total,
            failing=sorted({c.name for c in br.cases if c.status == "fail"} | set(br.failing_tests or [])),
        )
        for br in tr.backends
    ]
    run_cases = [c for c in tr.cases if c.status in ("ok", "fail")]
    if why:
        status, reason = Status.ERROR, why
    elif tr.status == "not_run" and (n_unsup := sum(1 for c in tr.cases if c.status == "not_supported")):
        status, reason = Status.NOT_RUN, f"{backend} supports none of the {n_unsup} cases (not supported)"
    elif tr.status == "not_run":
        status, reason = Status.NOT_RUN, f"no test case ran on {backend} (skipped, unsupported or none matched)"
    elif tr.status == "ok" and done is not None and done.returncode == 0:
        status, reason = Status.OK, ""
    else:
        status, reason = Status.FAIL, f"{sum(1 for c in run_cases if c.status == 'fail')} failing cases"
    entry = TestVariant(
        **at,
        status=status.value,
        reason=reason,
        backends=backends,
        n_ok=sum(1 for c in tr.cases if c.status == "ok"),
        n_fail=sum(1 for c in tr.cases if c.status == "fail"),
        n_not_supported=sum(1 for c in tr.cases if c.status == "not_supported"),
    )
    return entry, {c.name: c.status for c in run_cases}


def step(built: Built, opts: RunOptions, name: str) -> Step:
    """`test:<suite>`: the suite's test-backend-ops arguments from the recipe, plus the user's filter."""
    suite = name.split(":", 1)[1]
    wanted = tested_variants(opts, [s.name for s in built.states], built.scope is not None)
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
        procs=opts.test.procs,
        cache=built.ctx.ws.cache / "measure" if opts.reuse else None,
        jobs_default=opts.test.jobs_default,
    )
    if built.same_code:
        step.data["same_code"] = dict(built.same_code)
    return step


def tested_variants(opts: RunOptions, states: list[str], changed: bool) -> set[str]:
    """The variants the suites run on: those asked for (--test-variant); by default base and the series'
    end (the longest prefix of the series among this run's variants), or with --changed every variant
    (the step keeps the changed ones)."""
    if opts.test.variants and not opts.test.default_variants:
        return set(opts.test.variants)
    prefixes = [v for v in states if v.startswith("+")]
    if changed or not prefixes:
        return set(states)
    return {v for v in states if v == "base"} | {max(prefixes, key=lambda v: v.count("+"))}


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    """What the step's result depends on beyond the builds (a resumed run with other inputs is refused)."""
    suite = name.split(":", 1)[1]
    where = built.params(opts.test.filter)
    extra = ("-p", where) if where else ()
    return {"args": (*built.ctx.recipe.suites[suite], *extra)}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = TestData.from_step(old, str(bundle.path / "results.json"))
    if d.variants is ABSENT:
        raise ResultsError(f"{bundle.path / 'results.json'}: step {old.name!r} recorded no test run to reparse")
    tested = [b for b in bins if b.variant in d.variants] or bins
    return run_tests(bundle, tested, suite=d.suite, args=tuple(d.args), backend=d.backend, shards=list(d.shards or []))


_CASE_LINE = re.compile(r"^\s+[A-Z][A-Z0-9_]*\((.*)\): ")  # group 1: the case's params


def list_cases(b: Bins, backend: str, args: tuple[str, ...]) -> list[str] | None:
    """The cases (their params) a test run will report: test-backend-ops' fast `support` mode, same selection."""
    try:
        done = proc.run([b.exe("test-backend-ops"), "support", "-b", backend, *args], echo=False, check=False)
    except ToolNotFound:
        return None
    out = [m.group(1) for ln in done.stdout.splitlines() if (m := _CASE_LINE.match(ln))]
    return out or None


def split_shards(cases: list[str], procs: int) -> list[str]:
    """The -p regexes of `procs` processes (patchkit.measure.shards), said when the cases cannot be split."""
    out = sharding.split(cases, procs)
    if procs > 1 and cases and not out:
        print(f"test: the cases cannot be split {procs} ways by one parameter: one process")
    return out


def _counter(bar: Progress, variant: str):
    def on_line(line: str) -> None:
        if _CASE_LINE.match(line):
            bar.update(1)

    return on_line


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="test",
    help="test-backend-ops test mode on every variant, one step per recipe suite (test:<suite>)",
    resource=Resource.GPU,
    names=lambda recipe, opts: tuple(f"test:{s}" for s in opts.test.suites),
    tools=("test-backend-ops",),
    run=step,
    inputs=inputs,
    data=TestData,
    reparse=reparse,
    imports=ImportSpec(tool="test-backend-ops", log="test-{suite}-{variant}"),
)
