"""Step `bench:decode`: llama-bench throughput per variant and test (pp/tg, depth, micro-batch)."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from patchkit import backends, parsers
from patchkit.errors import ParseError, RecipeError
from patchkit.measure import model as model_mod
from patchkit.measure import stats
from patchkit.measure.clocks import Clocks
from patchkit.measure.kernel import MAX_ROUNDS, MAX_SECONDS, SETTLED, upstream_db
from patchkit.measure.tool import Bins, Built, run_logged
from patchkit.option_set import default
from patchkit.options import Context, RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step, upstreamdb

# ---------------------------------------------------------------------------------------------
# Decode: llama-bench, variants interleaved round by round


AA = "#2"  # the A/A copy of base: 'base#2', as bench:kernel names it
IDENTITY = ("model_type", "n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch", "type_k", "type_v", "n_gpu_layers")


def identity(rec) -> tuple:
    """llama-bench's own test identity of a record: one row per identity and variant, never merged."""
    return tuple(getattr(rec, k) for k in IDENTITY)


def decode_args(
    model: Path,
    *,
    depths: tuple[int, ...],
    type_k: str,
    type_v: str,
    n_prompt: tuple[int, ...],
    n_gen: tuple[int, ...],
    ubatch: tuple[int, ...],
    repetitions: int,
    threads: int,
    ngl: int,
    extra: tuple[str, ...],
) -> list[str]:
    def csv(xs) -> str:
        return ",".join(str(x) for x in xs)

    args = ["-m", str(model), "-fa", "1", "-ctk", type_k, "-ctv", type_v, "-p", csv(n_prompt or (0,))]
    args += ["-n", csv(n_gen or (0,)), "-d", csv(depths), "-r", str(repetitions), "-ngl", str(ngl)]
    if ubatch:
        args += ["-ub", csv(ubatch)]
    if threads:
        args += ["-t", str(threads)]
    return [*args, "-o", "json", *extra]


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

    @property
    def cap(self) -> int:
        return max(self.min_rounds, self.max_rounds)

    @classmethod
    def from_data(cls, d: dict) -> DecodeTiming:
        if "timing" in d:
            return cls(**d["timing"])
        n = int(d.get("rounds") or 1)
        return cls(min_rounds=n, max_rounds=n, aa=False)


def _with_depths(args: list[str], depths: list[int]) -> list[str]:
    out = list(args)
    if "-d" in out:
        out[out.index("-d") + 1] = ",".join(str(d) for d in depths)
    return out


@dataclass
class _State:
    rows: dict = field(default_factory=dict)  # (label, identity) -> row
    rounds: dict = field(default_factory=dict)  # identity -> rounds run
    stop: dict = field(default_factory=dict)  # identity -> why it stopped
    seconds: float = 0.0  # llama-bench process seconds, as the raw logs say
    logs: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    runs: list = field(default_factory=list)  # (label, records): the upstream database

    def settled(self, ident: tuple, labels: list[str], t: DecodeTiming) -> bool:
        for lab in labels:
            row = self.rows.get((lab, ident))
            if row is None or len(row["rounds"]) < t.min_rounds:
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


def _one_round(bundle, r, labeled, args, st: _State, clocks: Clocks, bar, timeout) -> None:
    open_ = [k for k in st.rounds if k not in st.stop]
    depths = sorted({k[IDENTITY.index("n_depth")] for k in open_})
    argv = args if r == 1 else _with_depths(args, depths)
    order = labeled if r % 2 else [labeled[0], *reversed(labeled[1:])]
    seen: set = set()
    for label, b in order:
        bar.update(1, f"round {r} {label}")
        tag = f"r{r}-{label.replace('#', '_aa')}"
        before = clocks.sample(f"{tag}-before")
        done, why, log = run_logged(
            bundle, f"decode-{tag}", [b.exe("llama-bench"), *argv], timeout=timeout, separate_stderr=True
        )
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
        clocks.around(r, label, before, clocks.sample(f"{tag}-after"))
        st.runs.append((label, list(recs or ())))
        for rec in recs or ():
            k = identity(rec)
            if r > 1 and (k not in st.rounds or k in st.stop):
                continue
            row = st.rows.setdefault((label, k), _row(label, rec))
            row["samples_ts"].extend(rec.samples_ts)
            row["logs"].append(st.logs[-1])
            row["rounds"].append(r)
            seen.add(k)
    for k in seen if r == 1 else open_:
        st.rounds[k] = st.rounds.get(k, 0) + 1


def run_decode(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    model_info: dict,
    args: list[str],
    timing: DecodeTiming | None = None,
    timeout: float = 1800,
) -> Step:
    """llama-bench on every variant and an A/A copy of base, interleaved round by round until every test
    is settled or capped (DecodeTiming); one row per (variant, test), verdicts against the A/A floor."""
    t0 = time.monotonic()
    t = timing or DecodeTiming()
    base = next((b for b in bins if b.variant == "base"), bins[0]) if bins else None
    labeled = [(b.variant, b) for b in ([base] if base else []) + [b for b in bins if b is not base]]
    if base is not None and t.aa:
        labeled.append((f"{base.variant}{AA}", base))
    st, clocks = _State(), Clocks(bundle, "decode")
    what = f"{t.min_rounds} to {t.cap} rounds x {len(labeled)} binaries"
    with Progress("bench:decode", total=t.cap * len(labeled), unit="run", what=what) as bar:
        r = 0
        while r < t.cap and (r == 0 or any(k not in st.stop for k in st.rounds)):
            r += 1
            _one_round(bundle, r, labeled, args, st, clocks, bar, timeout)
            if not st.rounds:
                break
            st.close([lab for lab, _ in labeled], t)
    logs = st.logs + clocks.logs
    if not st.rows:
        return Step(
            name="bench:decode",
            status=Status.ERROR if st.errors else Status.NOT_RUN,
            reason="; ".join(st.errors) or "llama-bench produced no records",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
        )
    order = [lab for lab, _ in labeled]
    tests = list(dict.fromkeys(k for _, k in st.rows))
    aa_label = f"{base.variant}{AA}" if base is not None and t.aa else ""
    aa = _aa(st.rows, tests, base.variant if base else "base", aa_label)
    floor = stats.noise_floor([a["ratio"] for a in aa]) if aa_label else 0.0
    db = upstream_db(bundle, upstreamdb.LLAMA_BENCH_DB, st.runs, st.errors)
    shown = [v for v in order if v != aa_label]
    data = {
        "model": model_info,
        "model_path": str(model),
        "args": [str(a) for a in args],
        "rounds": t.min_rounds,
        "rows": [
            _summary(st.rows[(v, k)], st if aa_label else None, k) for k in tests for v in shown if (v, k) in st.rows
        ],
        "vs_base": _vs_base(st.rows, tests, shown, floor),
        "upstream_db": db,
    }
    if aa_label:  # issue 27: rounds, the A/A copy and its floor, the clocks (older runs have none of these)
        data.update(timing=asdict(t), rounds_run=r, aa=aa, noise_floor=floor, aa_label=aa_label)
        data["clocks"] = clocks.data()
        data["process_seconds"] = round(st.seconds, 1)
    return Step(
        name="bench:decode",
        status=Status.ERROR if st.errors else Status.OK,
        reason="; ".join(st.errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=data,
    )


def _aa(rows: dict, tests: list, base: str, aa_label: str) -> list[dict]:
    out = []
    for k in tests:
        ref, aa = rows.get((base, k)), rows.get((aa_label, k))
        if ref is None or aa is None:
            continue
        rr = stats.ratio(ref["samples_ts"], aa["samples_ts"])
        s = stats.summarize(aa["samples_ts"])
        out.append({"test": ref["test"], "depth": ref["depth"], **rr.to_dict(), "median_ts": s.median})
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


def _summary(row: dict, st: _State | None = None, ident: tuple = ()) -> dict:
    s = stats.summarize(row["samples_ts"])
    more = {"rounds": len(row["rounds"]), "stop": st.stop.get(ident, "")} if st is not None else {}
    return {
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


def _vs_base(rows: dict, tests: list, order: list[str], floor: float = 0.0) -> list[dict]:
    vs = []
    for k in tests:
        ref = rows.get(("base", k))
        for v in order:
            row = rows.get((v, k))
            if v == "base" or ref is None or row is None:
                continue
            rr = stats.ratio(ref["samples_ts"], row["samples_ts"])
            verdict = stats.verdict(rr, floor, higher_is_better=True)
            vs.append({"variant": v, "test": row["test"], "depth": row["depth"], **rr.to_dict(), "verdict": verdict})
    return vs


def step(built: Built, opts: RunOptions, name: str) -> Step:
    d = opts.decode
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    path, info = decode_model(built.ctx, d.model, backend=built.backend)
    args = decode_args(
        path,
        depths=d.depths,
        type_k=d.type_k,
        type_v=d.type_v,
        n_prompt=d.n_prompt,
        n_gen=d.n_gen,
        ubatch=d.ubatch,
        repetitions=d.repetitions,
        threads=d.threads,
        ngl=backends.get(built.backend).gpu_layers,
        extra=d.extra_args,
    )
    return run_decode(built.bundle, built.measured, model=path, model_info=info, args=args, timing=timing_of(opts))


def timing_of(opts: RunOptions) -> DecodeTiming:
    d = opts.decode
    return DecodeTiming(
        min_rounds=d.rounds, max_rounds=d.max_rounds, max_noise=d.max_noise, max_seconds=float(d.max_seconds)
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    d = opts.decode
    return {
        "depths": d.depths,
        "n_prompt": d.n_prompt,
        "n_gen": d.n_gen,
        "ubatch": d.ubatch,
        "repetitions": d.repetitions,
        "rounds": d.rounds,
        "timing": asdict(timing_of(opts)),
        "model": d.model,
    }


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = old.data
    return run_decode(
        bundle,
        bins,
        model=Path(d["model_path"]),
        model_info=d["model"],
        args=d.get("args", []),
        timing=DecodeTiming.from_data(d),
    )


def decode_model(
    ctx: Context, model: str, *, backend: str = "", extra: Mapping[str, object] = MappingProxyType({})
) -> tuple[Path, dict]:
    """The GGUF to decode with: the user's (`model`), or the recipe's synthetic model for `backend`
    (with the [model] keys `extra` overrides: [numerics] model)."""
    if model:
        p = Path(model).expanduser()
        if not p.is_file():
            raise RecipeError(f"{ctx.recipe.path}: bench.decode.model: {p}: file not found")
        return p, {"path": str(p), "synthetic": False, "size": p.stat().st_size}
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
