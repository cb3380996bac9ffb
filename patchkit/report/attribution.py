"""Per-patch attribution: each PR patch's prefix without it against the prefix with it, on kernel medians
(bench:kernel) and decode t/s (bench:decode, per llama-bench test). Against base the stored ratios are used;
between two prefixes the ratio is computed from the stored samples. A prefix that compiles to base's code
(same_code) was not measured: base stands in for it. The summary counts these rows; the markdown here
shows only the computed ones (the stored ones are the kernel and decode tables' own cells)."""

from __future__ import annotations

import patchkit.report.intervals as intervals
from patchkit.compare import attribution as compare
from patchkit.measure import stats
from patchkit.report.decode import per_cell, tests_of
from patchkit.report.evidence import (
    Attribution,
    AttributionMissing,
    AttributionRow,
    DecodeRun,
    Evidence,
    KernelRun,
    Patch,
)
from patchkit.report.fmt import ARROW, Block, code, details, gpu_col, interval, num, prefix, table, text, verdict_word

RATIO_NOTE = (
    "Kernel ratio = time(with) / time(without), < 1 is faster; "
    "decode ratio = t/s(with) / t/s(without), > 1 is faster; computed from the stored samples. Intervals: "
)


def _row(
    gpu: str, pid: str, a: str, b: str, kind: str, what: str, values: tuple, rr: stats.Ratio, verdict: str, how: str
) -> AttributionRow:
    """One comparison: `a` (without the patch) against `b` (with it); values: the two medians and sample counts."""
    more = {k: v for k, v in rr.to_dict().items() if k not in ("ratio", "ci_low", "ci_high")}
    return AttributionRow(
        n=list(values[2:]),
        interval=more,
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
        if not va or not vb or not va.samples_us or not vb.samples_us:
            continue
        stored = c.vs_base.get(b) if a == "base" else None
        floor = c.floor if c.floor is not None else ke.measured.noise_floor or 0.0
        r = compare.kernel(va, vb, stored, floor, per_case=c.floor is not None, max_floor=ke.measured.max_floor or 0.0)
        values = (va.median, vb.median, va.n, vb.n)
        out.append(_row(ke.gpu, pid, a, b, "kernel", c.params, values, r.ratio, r.verdict, r.source))
    return out


def _decode_rows(de: DecodeRun, pid: str, a: str, b: str) -> list[AttributionRow]:
    m = de.measured
    if m is None:
        return []
    out = []
    for _, by in tests_of(m, [a, b]):
        xa, xb = by.get(a), by.get(b)
        if xa is None or xb is None:
            continue
        stored = xb.ratio if a == "base" else None
        floor = xb.ratio.interval.get("floor") if xb.ratio is not None and not stored else None
        cap = float((m.timing or {}).get("max_floor") or 0.0)
        r = compare.decode(
            xa.samples_ts,
            xb.samples_ts,
            stored,
            stored.verdict if stored else "",
            floor=None if floor is None else float(floor),
            max_floor=cap,
        )
        rr, verdict, how = r.ratio, r.verdict, r.source
        matrix = per_cell(m) and xb.n_prompt and xb.n_ubatch
        out.append(
            _row(
                de.gpu,
                pid,
                a,
                b,
                "decode",
                f"{xb.test}, ub {xb.n_ubatch}" if matrix else xb.test,
                (xa.median, xb.median, len(xa.samples_ts), len(xb.samples_ts)),
                rr,
                verdict,
                how,
            )
        )
    return out


def evidence(
    patches: list[Patch], kernel: list[KernelRun], decode: list[DecodeRun], same_code: list[dict[str, str]]
) -> Attribution:
    """Each PR patch on each run (kernel and decode entries in the runs' order; same_code: per run)."""
    ids = [p.id for p in patches if not p.local]
    prefixes = ["base"] + ["+" + "+".join(ids[: i + 1]) for i in range(len(ids))]
    out = Attribution(patches=ids)
    for ke, de, same in zip(kernel, decode, same_code):
        for i, pid in enumerate(ids):
            a, b = prefixes[i], prefixes[i + 1]
            if b in same:
                reason = f"`{b}` was not measured: {same[b]}"
                out.missing.append(AttributionMissing(gpu=ke.gpu, patch=pid, without=a, with_=b, reason=reason))
                continue
            a = "base" if a in same else a  # it compiles to base's code
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
    out: list[Block] = [text(prefix(multi, m.gpu) + f"{code(m.patch)}: not run: {m.reason}") for m in a.missing]
    computed = [r for r in a.rows if r.source == "computed"]
    if not computed:
        if a.rows:
            out.append(text("Every patch was compared against `base`: the ratios are the tables' own cells above."))
        return out
    rows = []
    for r in computed:
        kind = "us" if r.unit == "us" else "ts"
        what = f"kernel {code(_short(ev, r.what))}" if r.kind == "kernel" else f"decode {r.what}"
        rows.append(
            [
                *gpu_col(multi, r.gpu),
                code(r.patch),
                f"{code(r.without)} {ARROW} {code(r.with_)}",
                what,
                f"{num(r.value_without, kind)} {ARROW} {num(r.value_with, kind)} {r.unit}",
                f"{num(r.ratio, 'ratio')} {interval(r.ci_low, r.ci_high, 'ratio')}",
                verdict_word(r.verdict),
            ]
        )
    header = [*gpu_col(multi, "GPU"), "patch", "compared", "measurement", "median", "ratio", "verdict"]
    pairs = ", ".join(dict.fromkeys(f"{r.patch} ({r.with_} vs {r.without})" for r in computed))
    ns = [n for r in computed for n in r.n]
    note = text(RATIO_NOTE + intervals.caption([r.interval for r in computed], ns) + ".")
    inner = [table(header, rows), text("Raw logs: those of `bench:kernel` and `bench:decode` above"), note]
    return [*out, details(f"{pairs}: {len(computed)} comparisons computed from the stored samples", inner)]
