"""Step `bench:kernel`: test-backend-ops perf, variants interleaved round by round with an A/A copy of base.

Rounds go on per case until the case is settled (NVBench's rule: every binary has at least the minimum
of samples and of timed time, and the relative noise of its samples is below a threshold; the A/B
difference is never looked at) or a cap is reached; a settled case leaves the later rounds. Each case is
then judged once, from its interval against the A/A noise floor (see docs/kernel-timing.md).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from patchkit import parsers
from patchkit.errors import ParseError, ResultsError
from patchkit.measure import stats
from patchkit.measure.hooks import Around
from patchkit.measure.kind import ImportSpec, Resource, StepKind, one
from patchkit.measure.tool import Bins, Built, missing_options, run_logged
from patchkit.option_set import default
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step, upstreamdb
from patchkit.results.data import ABSENT
from patchkit.results.data.kernel import (
    KernelCase,
    KernelData,
    RatioVsBase,
    TimingData,
    UpstreamDb,
    VariantTimes,
)
from patchkit.workspace import machine_lock

MIN_US_ENV = "GGML_TEST_PERF_MIN_US"  # patches/local/0002: the timed time of each case per process
# set for every timing process (a binary without the local patches ignores them): patches/local/0006 prints each
# case's set-up and timed seconds to stderr ("perf-phases:", read by scripts/perf_budget.py), 0007 fills tensors
# faster and 0008 in cache-sized chunks without a float copy, printing init's parts ("perf-init:") (perf mode only;
# the timed loop is unchanged)
PERF_ENV = {"GGML_TEST_PERF_PHASES": "1", "GGML_TEST_PERF_FILL": "fast"}

# why a case stopped
SETTLED, MAX_ROUNDS, MAX_SECONDS = "settled", "max_rounds", "max_seconds"


@dataclass(frozen=True, kw_only=True)
class Timing:
    """When a case has been timed enough. A case is settled when every binary has at least `min_rounds`
    samples, at least `min_time_s` of timed time (avg_time_us * n_runs summed) and a relative noise
    (stdev / mean of its samples) of at most `max_noise`; it stops anyway after `max_rounds` rounds, and
    once every case has had `min_rounds` no new round starts after `max_seconds` of test-backend-ops
    processes (0: no time cap). `min_us` is each case's minimum timed time per process."""

    min_rounds: int = default("kernel.rounds")
    max_rounds: int = default("kernel.max_rounds")
    max_noise: float = default("kernel.max_noise")
    max_floor: float = default("kernel.max_floor")  # a case whose own A/A floor is above this is 'noisy' (0: none)
    min_time_s: float = default("kernel.min_time")  # results.json's name of kernel.min_time
    max_seconds: float = float(default("kernel.max_seconds"))
    min_us: int = default("kernel.min_us")
    # issue 34: a case settles only with the fewest samples its 95 % interval needs and its own A/A floor at most
    # max_floor; runs before it settled without (False: a replay of one takes their decisions)
    per_case: bool = True

    @classmethod
    def fixed(cls, rounds: int) -> Timing:
        """Exactly `rounds` rounds for every case (runs recorded before rounds were adaptive)."""
        return cls(min_rounds=rounds, max_rounds=rounds, max_seconds=0.0, per_case=False)

    @classmethod
    def from_data(cls, d: KernelData) -> Timing:
        """The timing a stored step ran with (fixed rounds for runs before rounds were adaptive)."""
        if not d.timing:
            return cls.fixed(d.rounds)
        return cls(**{"per_case": False, **d.timing.to_dict()})

    @property
    def cap(self) -> int:
        return max(self.min_rounds, self.max_rounds)


@dataclass
class Case:
    """One case's samples while it is timed: label -> per-process avg_time_us, n_runs and timed s."""

    params: str
    samples: dict[str, list[float]] = field(default_factory=dict)
    n_runs: dict[str, list[int]] = field(default_factory=dict)
    timed_s: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    stop: str = ""  # '' while open; else SETTLED / MAX_ROUNDS / MAX_SECONDS

    def add(self, label: str, rec) -> None:
        self.samples.setdefault(label, []).append(rec.time_us)
        self.n_runs.setdefault(label, []).append(rec.n_runs)
        self.timed_s[label] = self.timed_s.get(label, 0.0) + rec.time_us * rec.n_runs / 1e6

    def settled(self, labels: list[str], t: Timing) -> bool:
        """NVBench's rule, for every binary, and (issue 34) the fewest samples a side whose interval reaches the
        stated coverage and the case's own A/A floor (base against its copy, the last label) at most
        `max_floor`; never looks at the difference between base and a variant."""
        least = max(t.min_rounds, stats.min_samples() if t.per_case else 0)
        for lab in labels:
            xs = self.samples.get(lab, [])
            if len(xs) < least or self.timed_s.get(lab, 0.0) < t.min_time_s:
                return False
            if stats.rel_noise(xs) > t.max_noise:
                return False
        floor = self.floor(labels[0], labels[-1]) if t.per_case and t.max_floor else None
        if floor is not None and floor > t.max_floor:
            return False
        return self.rounds >= t.min_rounds

    def floor(self, base: str, aa: str) -> float | None:
        """The case's own A/A floor (stats.cell_floor of base#2 against base); None without both."""
        ref, copy = self.samples.get(base), self.samples.get(aa)
        if not ref or not copy or base == aa:
            return None
        return stats.cell_floor(stats.ratio(ref, copy))


# ---------------------------------------------------------------------------------------------
# Running the rounds


def perf_argv(b: Bins, backend: str, op: str, params: str, test_file: str) -> list:
    argv: list = [b.exe("test-backend-ops"), "perf", "-b", backend, "--output", "sql"]
    if test_file:
        argv += ["--test-file", test_file]
    else:
        argv += ["-o", op]
    if params:
        argv += ["-p", params]
    return argv


_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


def cases_regex(params: list[str]) -> str:
    """A test-backend-ops -p regex (std::regex, ECMAScript) matching exactly these cases' params."""
    return "^(" + "|".join(_REGEX_SPECIAL.sub(r"\\\1", p) for p in params) + ")$"


@dataclass
class _Rounds:
    """The state of the rounds: what runs them, and what they have produced so far."""

    bundle: Bundle
    labeled: list  # (label, Bins), base first and its A/A copy last
    argv_of: Callable[[Bins, str], list]  # the command line of a binary with a -p regex
    timing: Timing
    timeout: float
    cases: dict[str, Case] = field(default_factory=dict)
    seconds: float = 0.0  # summed test-backend-ops process seconds, as their raw logs say
    logs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    runs: list = field(default_factory=list)  # (label, records) of every tool run: the upstream database
    hooks: Around | None = None  # measured around each process: GPU clocks, power (patchkit.measure.hooks)
    prefix: str = "perf-"  # the raw logs' names: perf-r1-base.log (the sweep's rungs: perf-r3-r1-...)
    logs_of: dict[str, list[str]] = field(default_factory=dict)  # label -> its processes' raw logs

    def __post_init__(self) -> None:
        self.hooks = self.hooks or Around(self.bundle, "kernel")

    def perf(self, name: str, argv: list, what: str, label: str) -> list:
        """One test-backend-ops process: its supported records. Its seconds are read as its raw log
        has them, so that a replay takes the same decisions. A failure goes to `errors`."""
        done, why, path = run_logged(
            self.bundle,
            name,
            argv,
            timeout=self.timeout,
            env={MIN_US_ENV: str(self.timing.min_us), **PERF_ENV},
            separate_stderr=True,
        )
        self.logs.append(self.bundle.rel(path))
        self.logs_of.setdefault(label, []).append(self.logs[-1])
        self.seconds += round(done.seconds, 1) if done is not None else 0.0
        if why or done is None:
            self.errors.append(f"{what}: {why}")
            return []
        try:
            recs = parsers.parse_perf_sql(done.stdout, str(path))
        except ParseError as e:
            self.errors.append(f"{what}: {e}")
            return []
        self.runs.append((label, list(recs)))
        return [r for r in recs if r.supported is not False]

    def round(self, r: int, first_pattern: str, bar: Progress) -> None:
        """Round r: every binary once (order alternating between rounds), on the cases still open."""
        open_ = [c for c in self.cases.values() if not c.stop]
        pattern = first_pattern if r == 1 else cases_regex([c.params for c in open_])
        order = self.labeled if r % 2 else [self.labeled[0], *reversed(self.labeled[1:])]
        for label, b in order:
            bar.update(1, f"round {r} {label}" + (f", {len(open_)} cases open" if r > 1 else ""))
            name = f"{self.prefix}r{r}-{label.replace('#', '_aa')}"
            self.hooks.enter(name)
            recs = self.perf(name, self.argv_of(b, pattern), f"{label} round {r}", label)
            self.hooks.exit(name, r, label)
            for rec in recs:
                if r == 1:
                    self.cases.setdefault(rec.op_params, Case(params=rec.op_params))
                c = self.cases.get(rec.op_params)
                if c is not None and not c.stop:
                    c.add(label, rec)
        for c in self.cases.values() if r == 1 else open_:
            c.rounds += 1

    def close(self) -> None:
        """After a round: which open cases stop, and why."""
        t, labels = self.timing, [lab for lab, _ in self.labeled]
        open_ = [c for c in self.cases.values() if not c.stop]
        late = bool(t.max_seconds) and self.seconds >= t.max_seconds and all(c.rounds >= t.min_rounds for c in open_)
        for c in open_:
            if c.settled(labels, t):
                c.stop = SETTLED
            elif c.rounds >= t.cap:
                c.stop = MAX_ROUNDS
            elif late:
                c.stop = MAX_SECONDS

    def run(self, first_pattern: str) -> int:
        """The rounds until every case has stopped; returns how many ran."""
        t = self.timing
        with Progress(
            "bench:kernel",
            total=t.cap * len(self.labeled),
            unit="run",
            what=f"{t.min_rounds} to {t.cap} rounds x {len(self.labeled)} binaries, settled cases leave",
        ) as bar:
            r = 0
            while r < t.cap and (r == 0 or any(not c.stop for c in self.cases.values())):
                r += 1
                self.round(r, first_pattern, bar)
                if not self.cases:
                    break
                self.close()
        return r


def time_rounds(bundle: Bundle, labeled: list, argv_of: Callable, timing: Timing, pattern: str, **kw) -> _Rounds:
    """bench:kernel's rounds for another caller (the sweep's rungs): `labeled` (label, Bins), reference first
    and its A/A copy last, timed on `pattern`'s cases until every case stopped. The state it returns holds
    the cases, each label's raw logs, the errors and the hooks (clocks, power)."""
    rounds = _Rounds(bundle=bundle, labeled=labeled, argv_of=argv_of, timing=timing, **kw)
    rounds.run(pattern)
    return rounds


# ---------------------------------------------------------------------------------------------
# Judging each case once


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _variant(c: Case, label: str, nbytes: float | None, peak_bw_gbs: float | None) -> VariantTimes:
    xs = c.samples[label]
    s = stats.summarize(xs)
    gbs = nbytes / (s.median * 1e-6) / 1e9 if nbytes else None
    return VariantTimes(
        samples_us=xs,
        **s.to_dict(),
        gbs=gbs,
        pct_peak=(100 * gbs / peak_bw_gbs) if (gbs and peak_bw_gbs) else None,
        noise=_finite(stats.rel_noise(xs)),
        timed_s=c.timed_s[label],
        n_runs=c.n_runs[label],
    )


def judge(
    cases: dict[str, Case],
    op: str,
    base_label: str,
    aa_label: str,
    peak_bw_gbs: float | None,
    max_floor: float = 0.0,
) -> tuple[list[KernelCase], float]:
    """(cases as the step records them, the largest case floor): each case judged once, against its own A/A
    floor (issue 34: stats.cell_verdict, 'noisy' above `max_floor`, 'too few samples' below the coverage)."""
    out = []
    for c in cases.values():
        nbytes = stats.op_bytes(op, c.params)
        variants = {lab: _variant(c, lab, nbytes, peak_bw_gbs) for lab in c.samples}
        ref, floor = c.samples.get(base_label), c.floor(base_label, aa_label)
        aa_ratio = stats.ratio(ref, c.samples[aa_label]).ratio if floor is not None else None
        case = KernelCase(params=c.params, bytes=nbytes, variants=variants, aa_ratio=aa_ratio, vs_base={})
        case.rounds, case.stop, case.floor = c.rounds, c.stop, floor
        for label, xs in c.samples.items():
            if label == base_label or ref is None:
                continue
            rr = stats.ratio(ref, xs)
            v = stats.TOO_FEW if floor is None else stats.cell_verdict(rr, floor, max_floor=max_floor)
            case.vs_base[label] = RatioVsBase(**rr.to_dict(), verdict=v)
        out.append(case)
    return out, max((c.floor for c in out if c.floor is not None), default=0.0)


def timing_lock(backend: str) -> str:
    """The machine-wide lock of kernel timing on one device: the backend's device and the GPUs it sees."""
    return f"timing-{backend}-{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}"


def run_kernel_bench(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    params: str,
    test_file: str = "",
    timing: Timing | None = None,
    peak_bw_gbs: float | None = None,
    timeout: float = 1800,
) -> Step:
    t0 = time.monotonic()
    t = timing or Timing()
    if not bins:
        return Step(name="bench:kernel", status=Status.NOT_RUN, reason="no built variants")
    base = next((b for b in bins if b.variant == "base"), bins[0])
    asked = {"--output": "bench:kernel reads its --output sql records"}
    if test_file:
        asked["--test-file"] = "bench.kernel.test-file (--test-file) passes it"
    lack = "" if bundle.replay else missing_options(base, "test-backend-ops", asked)
    if lack:
        return Step(name="bench:kernel", status=Status.ERROR, reason=lack, seconds=round(time.monotonic() - t0, 1))
    labeled = [(base.variant, base), *[(b.variant, b) for b in bins if b is not base], (f"{base.variant}#2", base)]
    rounds = _Rounds(
        bundle=bundle,
        labeled=labeled,
        argv_of=lambda b, p: perf_argv(b, backend, op, p, test_file),
        timing=t,
        timeout=timeout,
    )
    with contextlib.nullcontext() if bundle.replay else machine_lock(timing_lock(backend), "bench:kernel"):
        rounds_run = rounds.run("" if test_file else params)
    cases, logs, errors = rounds.cases, rounds.logs + rounds.hooks.logs, rounds.errors
    data = KernelData(
        op=op,
        params=params,
        test_file=test_file,
        rounds=t.min_rounds,
        backend=backend,
        peak_bw_gbs=peak_bw_gbs,
        timing=TimingData(**{k: v for k, v in asdict(t).items() if k != "per_case" or v}),  # absent: runs before
        rounds_run=rounds_run,
        process_seconds=round(rounds.seconds, 1),
        confidence=stats.CONFIDENCE,
    )
    if hooks := rounds.hooks.data():  # issue 35; runs before it stored "clocks" (issue 27) or nothing
        data.hooks = hooks
    if not cases:
        return Step(
            name="bench:kernel",
            status=Status.ERROR if errors else Status.NOT_RUN,
            reason="; ".join(errors) or f"no {op} case matched {params or test_file!r} on {backend}",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
            data=data.to_dict(),
        )
    data.cases, data.noise_floor = judge(cases, op, labeled[0][0], labeled[-1][0], peak_bw_gbs, t.max_floor)
    data.labels = [lab for lab, _ in labeled]
    db = upstream_db(bundle, upstreamdb.TEST_BACKEND_OPS_DB, rounds.runs, errors)
    data.upstream_db = UpstreamDb(**db) if db else {}
    return Step(
        name="bench:kernel",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=data.to_dict(),
    )


def upstream_db(bundle: Bundle, name: str, runs: list, errors: list[str]) -> dict:
    """The step's records as upstream's sqlite database in the run folder (compare-llama-bench.py reads it)."""
    write = (
        upstreamdb.write_llama_bench_db if name == upstreamdb.LLAMA_BENCH_DB else upstreamdb.write_test_backend_ops_db
    )
    try:
        labels = write(bundle.path / name, [(v, recs) for v, recs in runs if recs])
    except ResultsError as e:
        errors.append(f"{name}: {e}")
        return {}
    return {"file": name, "labels": labels}


def timing_of(opts: RunOptions) -> Timing:
    k = opts.kernel
    return Timing(
        min_rounds=k.rounds,
        max_rounds=k.max_rounds,
        max_noise=k.max_noise,
        max_floor=k.max_floor,
        min_time_s=k.min_time,
        max_seconds=k.max_seconds,
        min_us=k.min_us,
    )


def step(built: Built, opts: RunOptions, name: str) -> Step:
    k = opts.kernel
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    return run_kernel_bench(
        built.bundle,
        built.measured,
        backend=k.backend,
        op=k.op,
        params=built.params(k.params),
        test_file=k.test_file,
        timing=timing_of(opts),
        peak_bw_gbs=built.peak_bw_gbs,
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    k = opts.kernel
    return {
        "op": k.op,
        "params": built.params(k.params),
        "test_file": k.test_file,
        "rounds": k.rounds,
        "timing": asdict(timing_of(opts)),
    }


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = KernelData.from_step(old, str(bundle.path / "results.json"))
    if d.op is ABSENT:
        raise ResultsError(f"{bundle.path / 'results.json'}: step 'bench:kernel' ran nothing: no settings to reparse")
    return run_kernel_bench(
        bundle,
        bins,
        backend=d.backend,
        op=d.op,
        params=d.params,
        test_file=d.test_file or "",
        timing=Timing.from_data(d),
        peak_bw_gbs=(bundle.env.get("gpu") or {}).get("peak_bw_gbs"),
    )


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="bench:kernel",
    help="kernel timing: test-backend-ops perf, variants interleaved with an A/A copy of base",
    resource=Resource.GPU,
    names=one("bench:kernel"),
    timing=True,
    tools=("test-backend-ops",),
    tables=("bench.kernel",),  # its op and params select the cases
    run=step,
    inputs=inputs,
    data=KernelData,
    reparse=reparse,
    imports=ImportSpec(tool="perf-sql", log="perf-r{round}-{variant}"),
)
