"""Per-patch attribution: each PR patch's prefix without it against the prefix with it, on kernel medians
(bench:kernel) and decode t/s (bench:decode). Against base the stored ratios are used; between two prefixes
the ratio is computed from the stored samples."""

from __future__ import annotations

from patchkit import stats
from patchkit.report.evidence import (
    Attribution,
    AttributionMissing,
    AttributionRow,
    DecodeRun,
    Evidence,
    KernelRun,
    Patch,
)
from patchkit.report.fmt import Block, bench_test_name, code, gpu_col, interval, num, prefix, table, text

RATIO_NOTE = (
    "Kernel ratio = time(with) / time(without), < 1 is faster; "
    "decode ratio = t/s(with) / t/s(without), > 1 is faster. "
    "Against base: the stored ratios; between two prefixes: computed from the stored samples "
    "(bootstrap 95 % interval of the ratio of medians)."
)


def _throughput_verdict(r: stats.Ratio) -> str:
    """A t/s ratio (> 1 faster) judged like a time ratio (its inverse)."""
    if min(r.ratio, r.ci_low, r.ci_high) <= 0:
        return "no measurable change"
    inv = stats.Ratio(ratio=1 / r.ratio, ci_low=1 / r.ci_high, ci_high=1 / r.ci_low)
    return stats.verdict(inv, 0.0)


def _row(
    gpu: str, pid: str, a: str, b: str, kind: str, what: str, values: tuple, rr: stats.Ratio, verdict: str, how: str
) -> AttributionRow:
    """One comparison: `a` (without the patch) against `b` (with it); values: the two medians."""
    return AttributionRow(
        gpu=gpu,
        patch=pid,
        without=a,
        with_=b,
        kind=kind,
        what=what,
        unit="us" if kind == "kernel" else "t/s",
        value_without=values[0],
        value_with=values[1],
        ratio=rr.ratio,
        ci_low=rr.ci_low,
        ci_high=rr.ci_high,
        verdict=verdict,
        source=how,
    )


def _kernel_rows(ke: KernelRun, pid: str, a: str, b: str) -> list[AttributionRow]:
    out = []
    for c in ke.measured.cases if ke.measured else []:
        va, vb = c.variants.get(a), c.variants.get(b)
        if not va or not vb or not va.get("samples_us") or not vb.get("samples_us"):
            continue
        stored = c.vs_base.get(b) if a == "base" else None
        if stored:
            rr = stats.Ratio(ratio=stored["ratio"], ci_low=stored["ci_low"], ci_high=stored["ci_high"])
            verdict, how = stored["verdict"], "stored"
        else:
            rr = stats.ratio(va["samples_us"], vb["samples_us"])
            verdict, how = stats.verdict(rr, ke.measured.noise_floor or 0.0), "computed"
        out.append(_row(ke.gpu, pid, a, b, "kernel", c.params, (va["median"], vb["median"]), rr, verdict, how))
    return out


def _decode_rows(de: DecodeRun, pid: str, a: str, b: str) -> list[AttributionRow]:
    m = de.measured
    if m is None:
        return []
    out = []
    rows = {(x.variant, x.depth, x.type_k, x.type_v, x.n_gen): x for x in m.rows}
    for (v, depth, tk, tv, ng), xb in rows.items():
        xa = rows.get((a, depth, tk, tv, ng))
        if v != b or xa is None:
            continue
        stored = next((s for s in m.vs_base if s.variant == b and s.depth == depth), None) if a == "base" else None
        if stored:
            rr = stats.Ratio(ratio=stored.ratio, ci_low=stored.ci_low, ci_high=stored.ci_high)
            verdict, how = stored.verdict, "stored"
        else:
            rr = stats.ratio(xa.samples_ts, xb.samples_ts)
            verdict, how = _throughput_verdict(rr), "computed"
        what = bench_test_name(xb.n_gen, xb.depth)
        out.append(_row(de.gpu, pid, a, b, "decode", what, (xa.median, xb.median), rr, verdict, how))
    return out


def evidence(patches: list[Patch], kernel: list[KernelRun], decode: list[DecodeRun]) -> Attribution:
    """Each PR patch on each run (kernel and decode entries in the runs' order)."""
    ids = [p.id for p in patches if not p.local]
    prefixes = ["base"] + ["+" + "+".join(ids[: i + 1]) for i in range(len(ids))]
    out = Attribution(patches=ids)
    for ke, de in zip(kernel, decode):
        for i, pid in enumerate(ids):
            a, b = prefixes[i], prefixes[i + 1]
            rows = _kernel_rows(ke, pid, a, b) + _decode_rows(de, pid, a, b)
            out.rows += rows
            if not rows:
                reason = f"`{a}` and `{b}` were not both measured (bench:kernel, bench:decode)"
                out.missing.append(AttributionMissing(gpu=ke.gpu, patch=pid, without=a, with_=b, reason=reason))
    return out


def _short(ev: Evidence, params: str) -> str:
    for e in ev.kernel.runs:
        for c in e.measured.cases if e.measured else []:
            if c.params == params:
                return c.short
    return params


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    a = ev.attribution
    if not a.patches:
        return [text("not run: no PR patch in this series")]
    out: list[Block] = []
    rows = []
    for r in a.rows:
        kind = "us" if r.unit == "us" else "ts"
        what = f"kernel {code(_short(ev, r.what))}" if r.kind == "kernel" else f"decode {r.what}"
        rows.append(
            [
                *gpu_col(multi, r.gpu),
                code(r.patch),
                f"{code(r.without)} → {code(r.with_)}",
                what,
                f"{num(r.value_without, kind)} → {num(r.value_with, kind)} {'µs' if kind == 'us' else 't/s'}",
                f"{num(r.ratio, 'ratio')} {interval(r.ci_low, r.ci_high, 'ratio')}",
                r.verdict,
            ]
        )
    if rows:
        header = [*gpu_col(multi, "GPU"), "patch", "compared", "measurement", "median", "ratio", "verdict"]
        out += [
            table(header, rows),
            text("Raw logs: those of `bench:kernel` and `bench:decode` above"),
            text(RATIO_NOTE),
        ]
    for m in a.missing:
        out.append(text(prefix(multi, m.gpu) + f"{code(m.patch)}: not run: {m.reason}"))
    return out
