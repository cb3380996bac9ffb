"""`bench:kernel`: test-backend-ops perf timings per case and variant, ratios against base, A/A noise floor."""

from __future__ import annotations

from typing import Any

from patchkit.report.evidence import Evidence, Kernel, KernelCase, KernelData, KernelRun
from patchkit.report.fmt import (
    DASH,
    Block,
    code,
    gpu_col,
    interval,
    logs_line,
    not_run,
    num,
    pct,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.runview import RunView, need

STEP = "bench:kernel"


def _cases(run: RunView, d: dict[str, Any]) -> list[KernelCase]:
    where = f"{run.where}: {STEP}"
    cases = []
    for i, c in enumerate(d["cases"]):
        for lab, v in (need(c, "variants", f"{where} case {i}") or {}).items():
            for k in ("median", "min", "max", "n"):
                need(v, k, f"{where} case {i} variant {lab}")
        cases.append(
            KernelCase(
                params=str(need(c, "params", f"{where} case {i}")),
                bytes=c.get("bytes"),
                variants=c["variants"],
                vs_base=c.get("vs_base") or {},
                aa_ratio=c.get("aa_ratio"),
            )
        )
    return cases


def _run(run: RunView) -> KernelRun:
    s = run.step(STEP)
    e = KernelRun.of(run, STEP, s)
    if s is not None and s.data.get("cases") is not None:
        d = s.data
        e.measured = KernelData(
            op=d.get("op"),
            params=d.get("params"),
            test_file=d.get("test_file"),
            rounds=d.get("rounds"),
            backend=d.get("backend"),
            peak_bw_gbs=d.get("peak_bw_gbs"),
            labels=list(d.get("labels") or []),
            noise_floor=d.get("noise_floor"),
            cases=_cases(run, d),
        )
    return e


def evidence(runs: list[RunView], order: list[str]) -> Kernel:
    """Each run's kernel timings (common_params is filled in once the path cases are known too)."""
    return Kernel(runs=[_run(r) for r in runs])


def _labels(have: list[KernelData]) -> list[str]:
    """The variant labels in the order the runs list them, then any only the cases name."""
    out: list[str] = []
    for m in have:
        for lab in m.labels:
            if lab not in out:
                out.append(lab)
    for m in have:
        for c in m.cases:
            out += [lab for lab in c.variants if lab not in out]
    return out


def _ratio_cell(r: dict[str, Any], floor: float | None) -> str:
    s = f"{num(r['ratio'], 'ratio')} {interval(r['ci_low'], r['ci_high'], 'ratio')} {r['verdict']}"
    if r["verdict"] == "no measurable change" and floor is not None and abs(r["ratio"] - 1) <= floor:
        s += f" (inside the A/A noise floor of {pct(100 * floor)})"
    return s


def _time_cell(v: dict[str, Any] | None) -> str:
    if not v:
        return DASH
    s = f"{num(v['median'], 'us')} {interval(v['min'], v['max'], 'us')}"
    if v.get("pct_peak") is not None:
        s += f" ({pct(v['pct_peak'])} of peak)"
    return s


def _notes(e: KernelRun, m: KernelData, base: str, pre: str) -> list[str]:
    n = sorted({v["n"] for c in m.cases for v in c.variants.values()})
    samples = ", ".join(str(x) for x in n)
    notes = [pre + f"{code(m.op)} on {code(m.backend)}, {m.rounds} interleaved rounds (samples per cell: {samples})."]
    floor = m.noise_floor
    if floor is not None and any(c.aa_ratio is not None for c in m.cases):
        notes.append(
            pre
            + f"A/A noise floor (`{base}` against its second copy): {num(100 * floor, 'pct')} %; "
            + 'a change inside it reads "no measurable change".'
        )
    else:
        notes.append(pre + "A/A noise floor: not measured (no A/A copy of base in this run).")
    if e.status in ("fail", "error"):
        notes.append(pre + "step result: " + state_label(e.status, e.reason))
    if m.peak_bw_gbs:
        notes.append(
            pre
            + "% of peak: bytes the op must move (K, V at their cache type, Q, mask, output) / median time / "
            + f"{m.peak_bw_gbs} GB/s."
        )
    return notes


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.kernel.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    labels = _labels([m for _, m in have])
    base = labels[0] if labels else "base"
    vs = [lab for lab in labels if lab != base]
    rows, logs, notes = [], [], []
    for e, m in have:
        logs += e.logs
        for c in m.cases:
            row = [*gpu_col(multi, e.gpu), code(c.short), *[_time_cell(c.variants.get(lab)) for lab in labels]]
            row += [_ratio_cell(r, m.noise_floor) if (r := c.vs_base.get(lab)) else DASH for lab in vs]
            rows.append(row)
        notes += _notes(e, m, base, prefix(multi, e.gpu))
    header = [*gpu_col(multi, "GPU"), "case", *[f"{lab} µs" for lab in labels], *[f"{lab} / {base}" for lab in vs]]
    out += [table(header, rows), logs_line(logs)]
    out.append(
        text(
            "Times: median µs per op call [min–max]; "
            f"ratio = time(variant) / time({base}), < 1 is faster, with its 95 % interval."
        )
    )
    out += [text(n) for n in notes]
    if ev.kernel.common_params:
        out.append(text("Common parameters: " + code(ev.kernel.common_params)))
    return out
