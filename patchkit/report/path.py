"""`bench:path`: the kernels each variant launches per case (Nsight Compute), and whether base's are kept.

Older results.json files store the step as `kernel-path`: renamed when read (patchkit.results.upgrade).
"""

from __future__ import annotations

from patchkit.measure import path as path_data
from patchkit.parsers.common import kernel_name
from patchkit.report.evidence import Evidence, KernelPath, PathCase, PathData, PathRun
from patchkit.report.fmt import (
    DASH,
    Block,
    code,
    details,
    gpu_col,
    logs_line,
    not_run,
    pct,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.part import Missing, Section, case_lines
from patchkit.report.runview import RunView, ordered

STEP = "bench:path"
SHOWN = "bench:path"  # the step's name in the report's text (one name everywhere)


def _run(run: RunView, order: list[str]) -> PathRun:
    s = run.step(STEP)
    e = PathRun.of(run, SHOWN, s)
    d = path_data.PathData.from_step(s, run.where) if s is not None else None
    if d is not None and d.measured:
        hidden = set(run.same_code)
        cases = []
        for c in d.cases:
            vs = {k: v for k, v in c.variants.items() if k not in hidden}
            cases.append(PathCase(params=c.params, variants={v: vs[v] for v in ordered(vs, order)}))
        e.measured = PathData(cases=cases, launch_count=d.launch_count or None)
    return e


def evidence(runs: list[RunView], order: list[str]) -> KernelPath:
    return KernelPath(runs=[_run(r, order) for r in runs])


def _rows(gpu: list[str], c: PathCase) -> list[list[str]]:
    base = {k.name for k in c.variants.get("base") or []}
    rows = []
    for v, ks in c.variants.items():
        names = {k.name for k in ks}
        same = DASH if v == "base" or not base else ("same kernels as base" if names == base else "differs from base")
        kern = "; ".join(f"{code(kernel_name(k.name))} x{k.count}, {pct(100 * k.share)}" for k in ks) or DASH
        rows.append([*gpu, code(c.short), code(v), kern, same])
    return rows


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.kernel_path.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    rows, logs = [], []
    for e, m in have:
        logs += e.logs
        if e.status in ("fail", "error"):
            out.append(text(prefix(multi, e.gpu) + "step result: " + state_label(e.status, e.reason)))
        for c in m.cases:
            rows += _rows(gpu_col(multi, e.gpu), c)
    inner: list[Block] = []
    if rows:
        header = [*gpu_col(multi, "GPU"), "case", "variant", "kernels (launches, share of time)", "path"]
        inner.append(table(header, rows))
    inner.append(logs_line(logs))
    counts = sorted({str(m.launch_count) for _, m in have if m.launch_count})
    inner.append(
        text(
            "Kernels named by Nsight Compute (`ncu`)"
            + (f", first {', '.join(counts)} launches per variant and case" if counts else "")
            + "; share = kernel time / all profiled kernel time."
        )
    )
    return [*out, details(_gist(have), inner)]


def _gist(have: list[tuple[PathRun, PathData]]) -> str:
    cases = [c for _, m in have for c in m.cases]
    differ: dict[str, int] = {}
    for c in cases:
        base = {k.name for k in c.variants.get("base") or []}
        for v, ks in c.variants.items():
            if v != "base" and base:
                differ[v] = differ.get(v, 0) + ({k.name for k in ks} != base)
    said = ", ".join(f"{v} in {n} of {len(cases)}" for v, n in differ.items())
    return f"kernels launched in {len(cases)} cases (ncu)" + (f"; other kernels than base: {said}" if said else "")


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    return case_lines(SHOWN, runs, ev.kernel_path.runs, ev.variants)


SECTION = Section("bench:path", STEP, "kernel_path", "Kernel path", evidence, markdown, not_tested)
