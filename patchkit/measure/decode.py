"""Step `bench:decode`: llama-bench throughput per variant and test (pp/tg, depth, micro-batch)."""

from __future__ import annotations

import hashlib
import statistics
import time
from pathlib import Path

from patchkit import model as model_mod
from patchkit import parsers, stats, upstreamdb
from patchkit.errors import RecipeError
from patchkit.measure.kernel import upstream_db
from patchkit.measure.tool import Bins, Built, run_parsed
from patchkit.options import Context, RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step

# ---------------------------------------------------------------------------------------------
# Decode: llama-bench, variants interleaved round by round


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


def run_decode(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    model_info: dict,
    args: list[str],
    rounds: int = 1,
    timeout: float = 1800,
) -> Step:
    """llama-bench on every variant, interleaved round by round; one row per (variant, test)."""
    t0 = time.monotonic()
    rows: dict[tuple, dict] = {}
    logs, errors = [], []
    runs: list[tuple[str, list]] = []  # (variant, records) of every tool run: the upstream database
    with Progress("bench:decode", total=max(rounds, 1) * len(bins), unit="run", what=f"{len(bins)} variants") as bar:
        for r in range(1, max(rounds, 1) + 1):
            for b in bins if r % 2 else list(reversed(bins)):
                bar.update(1, f"round {r} {b.variant}")
                recs = run_parsed(
                    bundle,
                    f"decode-r{r}-{b.variant}",
                    [b.exe("llama-bench"), *args],
                    parsers.parse_llama_bench_json,
                    errors,
                    f"{b.variant} round {r}",
                    logs,
                    timeout=timeout,
                    separate_stderr=True,
                )
                runs.append((b.variant, list(recs or ())))
                for rec in recs or ():
                    row = rows.setdefault((b.variant, identity(rec)), _row(b.variant, rec))
                    row["samples_ts"].extend(rec.samples_ts)
                    row["logs"].append(logs[-1])
    if not rows:
        return Step(
            name="bench:decode",
            status=Status.ERROR if errors else Status.NOT_RUN,
            reason="; ".join(errors) or "llama-bench produced no records",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
        )
    order = [b.variant for b in bins]
    tests = list(dict.fromkeys(k for _, k in rows))
    db = upstream_db(bundle, upstreamdb.LLAMA_BENCH_DB, runs, errors)
    return Step(
        name="bench:decode",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={
            "model": model_info,
            "model_path": str(model),
            "args": [str(a) for a in args],
            "rounds": rounds,
            "rows": [_summary(rows[(v, k)]) for k in tests for v in order if (v, k) in rows],
            "vs_base": _vs_base(rows, tests, order),
            "upstream_db": db,
        },
    )


def _row(variant: str, rec) -> dict:
    return {
        "variant": variant,
        "test": rec.test,
        "depth": rec.n_depth,
        **{k: getattr(rec, k) for k in IDENTITY if k != "n_depth"},
        "samples_ts": [],
        "logs": [],
    }


def _summary(row: dict) -> dict:
    s = stats.summarize(row["samples_ts"])
    return {
        **{k: v for k, v in row.items() if k != "logs"},
        "avg_ts": statistics.fmean(row["samples_ts"]),
        "stddev_ts": statistics.stdev(row["samples_ts"]) if len(row["samples_ts"]) > 1 else 0.0,
        "median": s.median,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
        "log": row["logs"][0],
        "logs": row["logs"],
    }


def _vs_base(rows: dict, tests: list, order: list[str]) -> list[dict]:
    vs = []
    for k in tests:
        ref = rows.get(("base", k))
        for v in order:
            row = rows.get((v, k))
            if v == "base" or ref is None or row is None:
                continue
            rr = stats.ratio(ref["samples_ts"], row["samples_ts"])
            verdict = stats.verdict(rr, 0.0, higher_is_better=True)
            vs.append({"variant": v, "test": row["test"], "depth": row["depth"], **rr.to_dict(), "verdict": verdict})
    return vs


def step(built: Built, opts: RunOptions, name: str) -> Step:
    d = opts.decode
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    path, info = decode_model(built.ctx, d.model)
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
        ngl=99 if built.backend == "cuda" else 0,
        extra=d.extra_args,
    )
    return run_decode(built.bundle, built.measured, model=path, model_info=info, args=args, rounds=d.rounds)


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    d = opts.decode
    return {
        "depths": d.depths,
        "n_prompt": d.n_prompt,
        "n_gen": d.n_gen,
        "ubatch": d.ubatch,
        "repetitions": d.repetitions,
        "rounds": d.rounds,
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
        rounds=d.get("rounds", 1),
    )


def decode_model(ctx: Context, model: str) -> tuple[Path, dict]:
    """The GGUF to decode with: the user's (`model`), or the recipe's synthetic model."""
    if model:
        p = Path(model).expanduser()
        if not p.is_file():
            raise RecipeError(f"{ctx.recipe.path}: bench.decode.model: {p}: file not found")
        return p, {"path": str(p), "synthetic": False, "size": p.stat().st_size}
    path, info = synth_model(ctx)
    return path, {**info, "synthetic": True}


def synth_model(ctx: Context, out: Path | None = None) -> tuple[Path, dict]:
    """The recipe's synthetic model, written once into the cache (keyed by its spec)."""
    spec = model_mod.spec_from_mapping(ctx.recipe.model)
    path = out or ctx.ws.cache / "models" / f"synthetic-{hashlib.sha256(repr(spec).encode()).hexdigest()[:12]}.gguf"
    if not path.is_file():
        tree = ctx.ws.variants(ctx.recipe.name) / "base"
        model_mod.write_synthetic_gguf(path, spec, gguf_py=tree if tree.is_dir() else None)
    return path, model_mod.describe(spec, path)
