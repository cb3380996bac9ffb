"""`bench:kernel`: test-backend-ops perf timings per case and variant, ratios against base, A/A noise floor."""

from __future__ import annotations

from typing import Any

import patchkit.report.intervals as intervals
from patchkit.measure import hooks, stats
from patchkit.report.evidence import Evidence, Kernel, KernelCase, KernelData, KernelRun
from patchkit.report.fmt import (
    DASH,
    Block,
    code,
    code_block,
    details,
    gpu_col,
    interval,
    logs_line,
    not_run,
    num,
    pct,
    plural,
    prefix,
    state_label,
    table,
    text,
    verdict_word,
)
from patchkit.report.part import Missing, Section, case_lines
from patchkit.report.runview import RunView
from patchkit.results import upstreamdb
from patchkit.results.data import ABSENT
from patchkit.results.data import kernel as kernel_data

STEP = "bench:kernel"
_ORDER = (stats.FASTER, stats.SLOWER, stats.AMBIGUOUS, stats.NOISY, stats.TOO_FEW, stats.SAME)  # counted in this order


def _cases(d: kernel_data.KernelData, hidden: set[str]) -> list[KernelCase]:
    """The cases, without the variants that compile to base's code (`hidden`: never shown with numbers)."""
    return [
        KernelCase(
            params=c.params,
            bytes=c.bytes,
            variants={k: v for k, v in c.variants.items() if k not in hidden},
            vs_base={k: v for k, v in c.vs_base.items() if k not in hidden},
            aa_ratio=c.aa_ratio,
            rounds=c.rounds or None,
            floor=c.floor if c.floor is not ABSENT else None,
        )
        for c in d.cases
    ]


def _run(run: RunView) -> KernelRun:
    s = run.step(STEP)
    e = KernelRun.of(run, STEP, s)
    d = kernel_data.KernelData.from_step(s, run.where) if s is not None else None
    if d is not None and d.measured:
        hidden = set(run.same_code)
        db = d.upstream_db if isinstance(d.upstream_db, kernel_data.UpstreamDb) else None
        if db:
            run.log(db.file)  # checked like a raw log
        e.measured = KernelData(
            op=d.op,
            params=d.params,
            test_file=d.test_file,
            rounds=d.rounds,
            backend=d.backend,
            peak_bw_gbs=d.peak_bw_gbs,
            labels=[lab for lab in d.labels if lab not in hidden],
            noise_floor=d.noise_floor,
            cases=_cases(d, hidden),
            upstream_db=db,
            clocks=d.clocks or None,
            hooks=d.hooks or None,
            max_floor=d.timing.max_floor if d.timing and d.timing.max_floor is not ABSENT else None,
        )
    return e


def upstream_db(run: RunView, d: dict[str, Any]) -> dict[str, Any] | None:
    """The step's upstream sqlite database (file, labels), its file checked like a raw log."""
    db = d.get("upstream_db") or None
    if db and db.get("file"):
        run.log(str(db["file"]))
    return db


def evidence(runs: list[RunView], order: list[str]) -> Kernel:
    """Each run's kernel timings (common_params is filled in once the path cases are known too)."""
    return Kernel(runs=[_run(r) for r in runs])


def labels_of(have: list[KernelData]) -> list[str]:
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


def _ratio_cell(r: kernel_data.RatioVsBase) -> str:
    return f"{num(r.ratio, 'ratio')} {interval(r.ci_low, r.ci_high, 'ratio')} {verdict_word(r.verdict)}"


def _time_cell(v: kernel_data.VariantTimes | None) -> str:
    if not v:
        return DASH
    s = f"{num(v.median, 'us')} {interval(v.min, v.max, 'us')}"
    return s + (f" {pct(v.pct_peak)}" if v.pct_peak is not None else "")


def _captions(have: list[tuple[KernelRun, KernelData]], base: str, multi: bool) -> list[str]:
    entries = [r.to_dict() for _, m in have for c in m.cases for r in c.vs_base.values()]  # intervals reads dicts
    ns = [v.n for _, m in have for c in m.cases for v in c.variants.values()]
    out = [
        f"Times: median [min, max] us per op call, then the share of the peak DRAM bandwidth; "
        f"ratio = time(variant) / time({base}), < 1 is faster."
    ]
    if entries:
        out.append("Ratio intervals: " + intervals.caption(entries, ns) + ".")
    if any(per_case(m) for _, m in have):
        out.append(_case_caption(have, base))
    for e, m in have:
        pre = prefix(multi, e.gpu)
        aa = m.noise_floor if any(c.aa_ratio is not None for c in m.cases) else None
        if not per_case(m):
            out.append(pre + "Verdicts: " + intervals.verdict_caption(entries, aa, base=base) + ".")
        if aa is None:
            out.append(pre + "A/A noise floor: not measured (no A/A copy of base in this run).")
        for c in hooks.summaries(hooks.stored(m.hooks, m.clocks.to_dict() if m.clocks else None)):
            out.append(pre + c)
        if m.peak_bw_gbs:
            out.append(
                pre + "Share of peak: bytes the op must move (K, V at their cache type, Q, mask, output) / "
                f"median time / {m.peak_bw_gbs} GB/s."
            )
        if e.status in ("fail", "error"):
            out.append(pre + "step result: " + state_label(e.status, e.reason))
    return out


def per_case(m: KernelData) -> bool:
    """Verdicts against each case's own A/A floor (issue 34; runs with exact intervals, upgraded when read)."""
    return any(c.floor is not None for c in m.cases)


def _case_caption(have: list[tuple[KernelRun, KernelData]], base: str) -> str:
    """How a case's verdict is reached against its own floor (issue 34), said once."""
    caps = sorted({float(m.max_floor or 0) for _, m in have if m.max_floor is not None})
    cap = f"above {', '.join(pct(100 * c) for c in caps)}" if any(caps) else "with no limit set"
    return (
        f"Verdicts per case, against the case's own A/A floor (column 'A/A floor': the edge of the interval of "
        f"time({base}'s copy) / time({base}) farthest from 1, at the case's samples): 'same' when the ratio's "
        f"interval lies inside [1 - floor, 1 + floor], 'faster' or 'slower' when it lies wholly outside; 'noisy' "
        f"when it straddles an edge of that band after the case's rounds, or the floor is {cap} (max-floor); "
        f"'too few samples' when the interval's exact coverage is below 95 % (fewer than 4 samples a side)."
    )


def compare_lines(
    multi: bool, gpu: str, run_prefix: str, db: kernel_data.UpstreamDb | dict[str, Any] | None, tbl: upstreamdb.Table
) -> list:
    """Upstream's sqlite file, its label -> variant mapping, and compare-llama-bench.py's command lines."""
    db = db.to_dict() if isinstance(db, kernel_data.UpstreamDb) else db
    if not db or not db.get("file") or not db.get("labels"):
        return []
    labels = {str(k): str(v) for k, v in db["labels"].items()}
    labels = dict(sorted(labels.items(), key=lambda kv: kv[1] != "base"))  # base first: the -b of every command
    f = f"<run>/{run_prefix}{db['file']}"
    mapping = ", ".join(f"{code(lab)} = {code(v)}" for lab, v in labels.items())
    cmds = [c for _, c in upstreamdb.compare_commands(f, tbl, labels)]
    return [
        text(
            prefix(multi, gpu) + f"Upstream's database: {code(run_prefix + db['file'])} (labels: {mapping}); "
            f"compare with llama.cpp's own script, run from a llama.cpp checkout (`<run>` is this run folder):"
        ),
        code_block(cmds),
    ]


def _rounds(have: list[tuple[KernelRun, KernelData]]) -> str:
    """The rounds the cases ran: "3" or, where cases stopped at different rounds, "3 to 6" (per case)."""
    per_case = {int(c.rounds) for _, m in have for c in m.cases if c.rounds is not None}
    if per_case:
        lo, hi = min(per_case), max(per_case)
        return str(lo) if lo == hi else f"{lo} to {hi}"
    return ", ".join(sorted({str(m.rounds) for _, m in have}))  # runs recorded before rounds were adaptive


def _gist(have: list[tuple[KernelRun, KernelData]], labels: list[str]) -> str:
    m0 = have[0][1]
    n = len({c.params for _, m in have for c in m.cases})
    s = f"{plural(n, 'case')} of {m0.op} on {m0.backend}, {len(labels)} binaries, {_rounds(have)} interleaved rounds"
    fl = [c.floor for _, m in have for c in m.cases if c.floor is not None]
    if fl:
        return s + f"; A/A floors per case {pct(100 * min(fl))} to {pct(100 * max(fl))}; " + _counts(have)
    floors = sorted({m.noise_floor for _, m in have if m.noise_floor is not None})
    return s + (f"; A/A noise floor {', '.join(pct(100 * f) for f in floors)}" if floors else "")


def _counts(have: list[tuple[KernelRun, KernelData]]) -> str:
    """The verdicts of the variants against base, each kind counted apart ('2 faster, 1 noisy, 3 same')."""
    labels = labels_of([m for _, m in have])
    aa = [lab for lab in labels if lab.endswith("#2")]
    vs = [r.verdict for _, m in have for c in m.cases for lab, r in c.vs_base.items() if lab not in aa]
    by = {v: vs.count(v) for v in dict.fromkeys(vs)}
    return ", ".join(f"{by[v]} {verdict_word(v)}" for v in _ORDER if v in by) or "no verdicts"


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.kernel.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    labels = labels_of([m for _, m in have])
    base = labels[0] if labels else "base"
    vs = [lab for lab in labels if lab != base]
    rows, logs, inner = [], [], []
    floors = any(per_case(m) for _, m in have)
    for e, m in have:
        logs += e.logs
        for c in m.cases:
            row = [*gpu_col(multi, e.gpu), code(c.short), *[_time_cell(c.variants.get(lab)) for lab in labels]]
            row += [pct(100 * c.floor) if c.floor is not None else DASH] if floors else []
            row += [_ratio_cell(r) if (r := c.vs_base.get(lab)) else DASH for lab in vs]
            rows.append(row)
    header = [*gpu_col(multi, "GPU"), "case", *[f"{lab} us" for lab in labels], *(["A/A floor"] if floors else [])]
    header += [f"{lab} / {base}" for lab in vs]
    inner += [table(header, rows), logs_line(logs), *[text(c) for c in _captions(have, base, multi)]]
    if ev.kernel.common_params:
        inner.append(text("Common parameters: " + code(ev.kernel.common_params)))
    prefixes = {r.gpu: r.log_prefix for r in ev.runs}
    for e, m in have:
        inner += compare_lines(multi, e.gpu, prefixes.get(e.gpu, ""), m.upstream_db, upstreamdb.TEST_BACKEND_OPS)
    return [*out, details(_gist(have, labels), inner)]


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    return case_lines(STEP, runs, ev.kernel.runs, ev.variants)


SECTION = Section("bench:kernel", STEP, "kernel", "Kernel timing", evidence, markdown, not_tested)
