"""Step `bench:kernel`: test-backend-ops perf, variants interleaved round by round with an A/A copy of base."""

from __future__ import annotations

import time

from patchkit import parse, stats, upstreamdb
from patchkit.errors import ResultsError
from patchkit.measure.tool import Bins, Built, run_parsed
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step

# ---------------------------------------------------------------------------------------------
# test-backend-ops perf, interleaved rounds with an A/A copy of base


def _perf_argv(b: Bins, backend: str, op: str, params: str, test_file: str) -> list:
    argv: list = [b.exe("test-backend-ops"), "perf", "-b", backend, "--output", "sql"]
    if test_file:
        argv += ["--test-file", test_file]
    else:
        argv += ["-o", op]
        if params:
            argv += ["-p", params]
    return argv


def run_kernel_bench(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    params: str,
    test_file: str = "",
    rounds: int = 3,
    peak_bw_gbs: float | None = None,
    timeout: float = 1800,
) -> Step:
    t0 = time.monotonic()
    if not bins:
        return Step(name="bench:kernel", status=Status.NOT_RUN, reason="no built variants")
    base = next((b for b in bins if b.variant == "base"), bins[0])
    labeled = [(base.variant, base), *[(b.variant, b) for b in bins if b is not base], (f"{base.variant}#2", base)]
    samples: dict[str, dict[str, list[float]]] = {}  # params -> label -> [time_us]
    logs: list[str] = []
    errors: list[str] = []
    runs: list[tuple[str, list]] = []  # (label, records) of every tool run: the upstream database
    with Progress(
        "bench:kernel",
        total=max(rounds, 1) * len(labeled),
        unit="run",
        what=f"{max(rounds, 1)} rounds x {len(labeled)} binaries",
    ) as bar:
        for r in range(1, max(rounds, 1) + 1):
            order = labeled if r % 2 else [labeled[0], *reversed(labeled[1:])]
            for label, b in order:
                bar.update(1, f"round {r}/{max(rounds, 1)} {label}")
                recs = run_parsed(
                    bundle,
                    f"perf-r{r}-{label.replace('#', '_aa')}",
                    _perf_argv(b, backend, op, params, test_file),
                    parse.parse_perf_sql,
                    errors,
                    f"{label} round {r}",
                    logs,
                    timeout=timeout,
                    separate_stderr=True,
                )
                runs.append((label, list(recs or ())))
                for rec in recs or ():
                    if rec.supported is False:
                        continue
                    samples.setdefault(rec.op_params, {}).setdefault(label, []).append(rec.time_us)
    if not samples:
        return Step(
            name="bench:kernel",
            status=Status.ERROR if errors else Status.NOT_RUN,
            reason="; ".join(errors) or f"no {op} case matched {params or test_file!r} on {backend}",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
            data={
                "op": op,
                "params": params,
                "test_file": test_file,
                "rounds": rounds,
                "backend": backend,
                "peak_bw_gbs": peak_bw_gbs,
            },
        )
    cases = []
    aa = []
    base_label, aa_label = labeled[0][0], labeled[-1][0]
    for p, by_label in samples.items():
        nbytes = stats.op_bytes(op, p)
        variants = {}
        for label, xs in by_label.items():
            s = stats.summarize(xs)
            gbs = nbytes / (s.median * 1e-6) / 1e9 if nbytes else None
            variants[label] = {
                "samples_us": xs,
                **s.to_dict(),
                "gbs": gbs,
                "pct_peak": (100 * gbs / peak_bw_gbs) if (gbs and peak_bw_gbs) else None,
            }
        aa_ratio = None
        if base_label in by_label and aa_label in by_label:
            aa_ratio = stats.ratio(by_label[base_label], by_label[aa_label]).ratio
            aa.append(aa_ratio)
        cases.append({"params": p, "bytes": nbytes, "variants": variants, "aa_ratio": aa_ratio})
    floor = stats.noise_floor(aa)
    for c in cases:
        ref = samples[c["params"]].get(base_label)
        c["vs_base"] = {}
        for label, xs in samples[c["params"]].items():
            if label == base_label or ref is None:
                continue
            rr = stats.ratio(ref, xs)
            c["vs_base"][label] = {**rr.to_dict(), "verdict": stats.verdict(rr, floor)}
    db = upstream_db(bundle, upstreamdb.TEST_BACKEND_OPS_DB, runs, errors)
    return Step(
        name="bench:kernel",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={
            "op": op,
            "params": params,
            "test_file": test_file,
            "rounds": rounds,
            "backend": backend,
            "peak_bw_gbs": peak_bw_gbs,
            "labels": [lab for lab, _ in labeled],
            "cases": cases,
            "noise_floor": floor,
            "upstream_db": db,
        },
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


def step(built: Built, opts: RunOptions, name: str) -> Step:
    k = opts.kernel
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    return run_kernel_bench(
        built.bundle,
        built.measured,
        backend=k.backend,
        op=k.op,
        params=k.params,
        test_file=k.test_file,
        rounds=k.rounds,
        peak_bw_gbs=built.peak_bw_gbs,
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    k = opts.kernel
    return {"op": k.op, "params": k.params, "test_file": k.test_file, "rounds": k.rounds}


def reparse(bundle: Bundle, old: Step, bins: list[Bins]) -> Step:
    d = old.data
    return run_kernel_bench(
        bundle,
        bins,
        backend=d["backend"],
        op=d["op"],
        params=d["params"],
        test_file=d.get("test_file", ""),
        rounds=d["rounds"],
        peak_bw_gbs=(bundle.env.get("gpu") or {}).get("peak_bw_gbs"),
    )
