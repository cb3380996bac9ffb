"""The summary a reviewer reads first: per PR patch, what it changes, where it is faster, slower or unchanged
(kernel cases and decode tests, counted from the per-patch attribution, with the range of the ratios),
its tests and numerics; then the whole series, the compile checks, and the variants not measured.
Every number here is a cell of the evidence below it (kernel and decode tables, attribution)."""

from __future__ import annotations

from typing import Any

from patchkit.report.check import counts as check_counts
from patchkit.report.evidence import AttributionRow, Evidence
from patchkit.report.fmt import ARROW, DASH, Block, bullets, code, gpu_col, num, table, text, verdict_word
from patchkit.report.hardware import gpu_line
from patchkit.report.numerics import pair_result
from patchkit.report.occupancy import summary_line as occupancy_line
from patchkit.report.test import new_failures, passed

ORDER = ("faster", "slower", "ambiguous", "noisy", "too few samples", "same", "no change")
RANGED = ("faster", "slower", "ambiguous")  # categories shown with the range of their ratios


def verdict_counts(ratios: list[tuple[Any, float]]) -> str:
    """(verdict, ratio) pairs -> '3 faster (0.676-0.985), 4 slower (1.124-1.637), 5 no change'."""
    if not ratios:
        return DASH
    by: dict[str, list[float]] = {}
    for v, r in ratios:
        by.setdefault(verdict_word(v), []).append(r)
    keys = [k for k in ORDER if k in by] + sorted(k for k in by if k not in ORDER)
    parts = []
    for k in keys:
        rs = sorted(by[k])
        span = num(rs[0], "ratio") if len(rs) == 1 else f"{num(rs[0], 'ratio')}-{num(rs[-1], 'ratio')}"
        parts.append(f"{len(rs)} {k}" + (f" ({span})" if k in RANGED else ""))
    return ", ".join(parts)


def _rows_of(ev: Evidence, gpu: str, pid: str, kind: str) -> list[AttributionRow]:
    return [r for r in ev.attribution.rows if r.gpu == gpu and r.patch == pid and r.kind == kind]


def tests_cell(ev: Evidence, gpu: str, variant: str) -> str:
    parts = []
    for s in ev.tests.suites:
        for e in s.runs:
            if e.gpu != gpu or e.measured is None:
                continue
            v = next((x for x in e.measured.variants if x.variant == variant), None)
            if v is None:
                continue
            res = passed(v)
            if new := new_failures(e.measured.diff.get(variant)):
                res += f", {new}"
            parts.append((f"{s.suite}: " if len(ev.tests.suites) > 1 else "") + res)
    return "; ".join(parts) or "not run"


def numerics_cell(ev: Evidence, gpu: str, variant: str) -> str:
    for e in ev.numerics.runs:
        if e.gpu != gpu or e.measured is None:
            continue
        for p in e.measured.pairs:
            if {p.a, p.b} == {"base", variant}:
                return pair_result(p)
    return "not run"


def _same_code(ev: Evidence) -> dict[str, dict[str, str]]:
    return {b.gpu: b.same_code for b in ev.builds}


def _patch_rows(ev: Evidence, multi: bool) -> tuple[list[list[str]], bool]:
    """One row per run and PR patch; whether any row holds a result."""
    pr = [p for p in ev.patches if not p.local]
    same = _same_code(ev)
    rows, any_result = [], False
    for run in ev.runs:
        for i, p in enumerate(pr):
            with_ = "+" + "+".join(x.id for x in pr[: i + 1])
            lead = [*gpu_col(multi, run.gpu), code(p.id), p.subject or DASH]
            why = same.get(run.gpu, {}).get(with_)
            if why:
                rows.append([*lead, f"not measured: {why}", DASH, DASH, DASH])
                any_result = True
                continue
            k = [(r.verdict, r.ratio) for r in _rows_of(ev, run.gpu, p.id, "kernel")]
            d = [(r.verdict, r.ratio) for r in _rows_of(ev, run.gpu, p.id, "decode")]
            none = "not measured" if any(m.gpu == run.gpu and m.patch == p.id for m in ev.attribution.missing) else DASH
            cells = [
                verdict_counts(k) if k else none,
                verdict_counts(d) if d else none,
                tests_cell(ev, run.gpu, with_),
                numerics_cell(ev, run.gpu, with_),
            ]
            any_result = any_result or bool(k or d) or any(c != "not run" for c in cells[2:])
            rows.append([*lead, *cells])
    return rows, any_result


COLUMNS = ("kernel time ratio", "decode t/s ratio", "tests", "numerics")  # the summary's result columns


def step_verdicts(ev: Evidence, column: str) -> list[str]:
    """One summary column (COLUMNS) as lines, one per run and PR patch ('0001: 2 faster (...), 5 same'), for
    the live report's print when a step is stored (patchkit.run.live); [] when no patch has a result in it."""
    rows, _ = _patch_rows(ev, ev.multi)
    lead = 3 if ev.multi else 2  # [GPU,] patch, change
    out, answered = [], False
    for r in rows:
        cells = r[lead:]
        cell = cells[COLUMNS.index(column)]
        if cell == DASH and cells[0].startswith("not measured"):  # the row's reason stands in the first column
            cell = cells[0]
        if cell not in (DASH, "not run"):
            out.append(": ".join([*r[: lead - 2], r[lead - 2].strip("`"), cell]))
            answered = answered or not cell.startswith("not measured")
    if not answered and column in COLUMNS[:2]:  # --changed: a patch's own reference was not timed (unchanged)
        for pre, last, k, d in _series_counts(ev, ev.multi):
            counts = k if column == COLUMNS[0] else d
            if counts:
                out.append(f"{pre}whole series (base {ARROW} {last}): {verdict_counts(counts)}")
    return out


def _series(ev: Evidence, multi: bool) -> list[str]:
    """The whole series against base (only when it has several PR patches)."""
    return [
        pre + f"Whole series (`base` {ARROW} {code(last)}): kernel {verdict_counts(k)}; decode {verdict_counts(d)}."
        for pre, last, k, d in _series_counts(ev, multi)
    ]


def _series_counts(ev: Evidence, multi: bool) -> list[tuple[str, str, list, list]]:
    """Per run with a result: (the run's prefix, the series' end, kernel (verdict, ratio)s, decode ones) of the
    whole series against base; [] with fewer than two PR patches."""
    pr = [p for p in ev.patches if not p.local]
    if len(pr) < 2:
        return []
    last = "+" + "+".join(p.id for p in pr)
    out = []
    for run in ev.runs:
        ke = next((e.measured for e in ev.kernel.runs if e.gpu == run.gpu and e.measured), None)
        de = next((e.measured for e in ev.decode.runs if e.gpu == run.gpu and e.measured), None)
        k = [(c.vs_base[last].verdict, c.vs_base[last].ratio) for c in ke.cases if last in c.vs_base] if ke else []
        d = [(x.ratio.verdict, x.ratio.ratio) for x in de.rows if x.variant == last and x.ratio] if de else []
        if k or d:
            out.append((f"{run.gpu}: " if multi else "", last, k, d))
    return out


def _bullets(ev: Evidence, multi: bool) -> list[str]:
    items = []
    for b in ev.builds:
        pre = f"{b.gpu}: " if multi else ""
        for c in b.checks:
            items += [pre + "Compile checks: " + n + "." for n in check_counts(c)]
        items += [pre + f"{code(v)}: not measured: {why}." for v, why in b.same_code.items()]
        items += scope_lines(pre, b.scope)
    return items


def scope_lines(pre: str, sc: dict | None) -> list[str]:
    """What a --changed run measured: the changed variants and why, the cases, the unchanged ones."""
    if not sc:
        return []
    out = []
    for v, c in (sc.get("changed") or {}).items():
        since = f" since {code(str(c.get('since'))[:12])}" if c.get("since") else ""
        out.append(pre + f"`--changed`: {code(v)} changed{since}: {c.get('why')}.")
    cases = code(sc["params"]) if sc.get("params") else "every case"
    out.append(pre + f"`--changed`: cases measured: {cases}; base measured again as the reference, in this run.")
    for v, why in (sc.get("unchanged") or {}).items():
        what = "not tested again, timed again as the reference" if v == "base" else "not measured"
        out.append(pre + f"`--changed`: {code(v)}: {what}: {why}.")
    out += [pre + line.replace("--changed", "`--changed`", 1) + "." for line in sc.get("rows_lines") or ()]
    return out


def markdown(ev: Evidence) -> list[Block]:
    bases = list(dict.fromkeys(str(h.base.get("upstream") or h.base.get("commit") or "")[:31] for h in ev.hardware))
    base = f", base {', '.join(code(b) for b in bases if b)}" if any(bases) else ""
    out = [text("Measured on " + ", ".join(gpu_line(h) for h in ev.hardware) + base + ".")]
    pr = [p for p in ev.patches if not p.local]
    rows, any_result = _patch_rows(ev, ev.multi)
    if not pr:
        out.append(text("No PR patch in this series: nothing is compared."))
    elif not any_result:
        measured = sorted({v for e in ev.kernel.runs + ev.decode.runs if e.measured for v in _variants(e.measured)})
        out.append(
            text(
                "No patched variant was measured in this run"
                + (f" (measured: {', '.join(code(v) for v in measured)})" if measured else "")
                + ": no patch is compared."
            )
        )
    else:
        header = [*gpu_col(ev.multi, "GPU"), "patch", "change", "kernel time ratio", "decode t/s ratio"]
        out.append(table([*header, "tests", "numerics"], rows))
        out.append(text("Raw logs: those of the evidence below."))
        chain = ["base"] + ["+" + "+".join(x.id for x in pr[: i + 1]) for i in range(len(pr))]
        out.append(
            text(
                f"Each patch: the variant with it against the one without ({f' {ARROW} '.join(map(code, chain))}); "
                "kernel: time(with) / time(without) per test-backend-ops perf case, < 1 is faster; decode: "
                "t/s(with) / t/s(without) per llama-bench test, > 1 is faster; tests and numerics: the variant with "
                "the patch against `base`. Evidence, intervals and verdicts below"
                + (
                    "; comparisons between two patched variants are computed from the stored samples "
                    "(Per-patch attribution)."
                    if any(r.source == "computed" for r in ev.attribution.rows)
                    else "."
                )
            )
        )
    out += [text(s) for s in _series(ev, ev.multi)]
    out += [text(s) for s in _timeline_lines(ev)]
    out += [text(s) for s in [occupancy_line(ev)] if s]  # bench:occupancy, in the reviewer's words
    items = _bullets(ev, ev.multi)
    return out + ([bullets(items)] if items else [])


def _timeline_lines(ev: Evidence) -> list[str]:
    """The wall time of each run and its critical path (runs recorded before the timeline have none)."""
    out = []
    for h in ev.hardware:
        tl = h.timeline
        if not tl:
            continue
        who = f"{h.gpu}: " if ev.multi else ""
        gpu = "GPU" if h.env is None or h.env.get("gpu") else "timing"  # a CPU run's timed steps have no GPU
        beside = f"builds and compile checks beside the {gpu} steps" if tl.get("overlap") else "one step after another"
        path = f" {ARROW} ".join(f"{c['step']} {c['seconds']:.0f} s" for c in tl["critical_path"])
        b = tl.get("busy_s", {})
        busy = f"CPU lane {b.get('cpu', 0):.0f} s, {gpu} lane {b.get('gpu', 0):.0f} s past the builds"
        verdict = f", the kernel verdict at {v:.0f} s" if (v := tl.get("to_kernel_verdict_s")) else ""
        if tl.get("finished") is False:
            out.append(
                f"{who}The run did not finish: its recorded steps span {tl['wall_s']:.0f} s{verdict} ({busy}); "
                f"critical path of the recorded steps: {path} (`timeline.png`)."
            )
            continue
        out.append(
            f"{who}Wall time {tl['wall_s']:.0f} s{verdict} ({busy}; {beside}); critical path: {path} (`timeline.png`)."
        )
        if tl.get("earlier"):
            out.append(
                f"{who}Resumed run: done by an earlier command, not in this wall time: "
                + ", ".join(code(n) for n in tl["earlier"])
                + "."
            )
    return out


def _variants(m: Any) -> set[str]:
    if hasattr(m, "cases"):
        return {lab for c in m.cases for lab in c.variants if "#" not in lab}
    return {x.variant for x in m.rows}
