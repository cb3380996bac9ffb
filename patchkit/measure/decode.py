"""Step `bench:decode`: llama-bench decode throughput per variant and depth."""

from __future__ import annotations

import hashlib
import statistics
import time
from pathlib import Path

from patchkit import model as model_mod
from patchkit import parse, stats
from patchkit.errors import RecipeError
from patchkit.measure.tool import Bins, Built, run_parsed
from patchkit.options import Context, RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step

# ---------------------------------------------------------------------------------------------
# Decode: llama-bench, variants interleaved round by round


def run_decode(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    model_info: dict,
    depths: tuple[int, ...],
    type_k: str,
    type_v: str,
    n_gen: int,
    repetitions: int,
    rounds: int = 1,
    threads: int = 0,
    ngl: int = 99,
    extra: tuple[str, ...] = (),
    timeout: float = 1800,
) -> Step:
    t0 = time.monotonic()
    args = [
        "-m",
        str(model),
        "-fa",
        "1",
        "-ctk",
        type_k,
        "-ctv",
        type_v,
        "-p",
        "0",
        "-n",
        str(n_gen),
        "-d",
        ",".join(str(d) for d in depths),
        "-r",
        str(repetitions),
        "-ngl",
        str(ngl),
        "-o",
        "json",
        *extra,
    ]
    if threads:
        args += ["-t", str(threads)]
    rows: dict[tuple[str, int], dict] = {}
    logs, errors = [], []
    with Progress("bench:decode", total=max(rounds, 1) * len(bins), unit="run", what=f"{len(bins)} variants") as bar:
        for r in range(1, max(rounds, 1) + 1):
            order = bins if r % 2 else list(reversed(bins))
            for b in order:
                bar.update(1, f"round {r} {b.variant}")
                recs = run_parsed(
                    bundle,
                    f"decode-r{r}-{b.variant}",
                    [b.exe("llama-bench"), *args],
                    parse.parse_llama_bench_json,
                    errors,
                    f"{b.variant} round {r}",
                    logs,
                    timeout=timeout,
                    separate_stderr=True,
                )
                for rec in recs or ():
                    row = rows.setdefault(
                        (b.variant, rec.n_depth),
                        {
                            "variant": b.variant,
                            "depth": rec.n_depth,
                            "type_k": rec.type_k,
                            "type_v": rec.type_v,
                            "n_gen": rec.n_gen,
                            "samples_ts": [],
                            "logs": [],
                        },
                    )
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
    out_rows = []
    for (v, d), row in sorted(rows.items(), key=lambda kv: (kv[0][1], [b.variant for b in bins].index(kv[0][0]))):
        s = stats.summarize(row["samples_ts"])
        out_rows.append(
            {
                **{k: row[k] for k in ("variant", "depth", "type_k", "type_v", "n_gen", "samples_ts")},
                "avg_ts": statistics.fmean(row["samples_ts"]),
                "stddev_ts": statistics.stdev(row["samples_ts"]) if len(row["samples_ts"]) > 1 else 0.0,
                "median": s.median,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "log": row["logs"][0],
                "logs": row["logs"],
            }
        )
    vs = []
    for (v, d), row in rows.items():
        ref = rows.get(("base", d))
        if v == "base" or ref is None:
            continue
        rr = stats.ratio(ref["samples_ts"], row["samples_ts"])
        vs.append({"variant": v, "depth": d, **rr.to_dict(), "verdict": stats.verdict(rr, 0.0, higher_is_better=True)})
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
            "rows": out_rows,
            "vs_base": sorted(vs, key=lambda x: (x["depth"], x["variant"])),
        },
    )


def step(built: Built, opts: RunOptions, name: str) -> Step:
    d = opts.decode
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    path, info = decode_model(built.ctx, d.model)
    return run_decode(
        built.bundle,
        built.measured,
        model=path,
        model_info=info,
        depths=d.depths,
        type_k=d.type_k,
        type_v=d.type_v,
        n_gen=d.n_gen,
        repetitions=d.repetitions,
        rounds=d.rounds,
        threads=d.threads,
        ngl=99 if built.backend == "cuda" else 0,
        extra=d.extra_args,
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    d = opts.decode
    return {"depths": d.depths, "n_gen": d.n_gen, "repetitions": d.repetitions, "rounds": d.rounds, "model": d.model}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = old.data
    return run_decode(
        bundle,
        bins,
        model=Path(d["model_path"]),
        model_info=d["model"],
        depths=(),
        type_k="",
        type_v="",
        n_gen=0,
        repetitions=0,
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
