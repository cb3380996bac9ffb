"""`bench:occupancy`: per case, the dominant kernels of each variant with ncu's blocks per SM (and what
limits them), occupancy, DRAM and L2; the self-check of the formula; then the predicted table per target
GPU from the compile checks (patchkit.compare.occupancy_predict), labelled predicted."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import patchkit.compare.occupancy_predict as pred
from patchkit.errors import OptionError
from patchkit.measure import occupancy_formula as occ
from patchkit.measure.occupancy import Cliff, Launch, OccupancyData
from patchkit.report.evidence import Evidence, StepRun
from patchkit.report.fmt import (
    ARROW,
    DASH,
    Block,
    code,
    details,
    gpu_col,
    logs_line,
    not_run,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.part import Missing, Section
from patchkit.report.path import kernel_name
from patchkit.report.runview import RunView, ordered
from patchkit.results.data.base import ABSENT
from patchkit.results.data.check import CheckData

STEP = "bench:occupancy"
DOMINANT = 0.9  # kernels shown per variant: the largest shares until they add up to this (at most MAX_KERNELS)
MAX_KERNELS = 3
LIMITER = {"registers": "registers", "shared_mem": "shared memory", "warps": "warps", "blocks": "blocks"}
ASSUMPTION = (
    "Predicted, not measured: registers per thread and static shared memory from the compile check for the "
    "target's arch (ptxas), block size, grid and dynamic shared memory from the launches measured here. It "
    "assumes the host picks the same kernel and launch configuration on the target (true where both archs use "
    "one config table, as ggml's Ampere MMA config serves cc 8.0 to 9.x; not where the host code branches on "
    "the arch, e.g. a kernel choice made only from cc 8.9); waves use the measured grid, which stream-k "
    "kernels size from the SM count."
)


@dataclass(kw_only=True)
class OccKernel:
    """One kernel (name and launch configuration) of one variant and case, over its profiled launches."""

    name: str
    launches: int
    share: float  # of the profiled launches' ncu duration
    total_ns: float = 0.0
    first: Launch  # its first launch as stored (ncu's fields, the formula's answer)
    dram_pct: float | None = None  # mean over its launches
    achieved_pct: float | None = None


@dataclass(kw_only=True)
class OccPredicted:
    case: str
    variant: str
    kernel: str
    arch: str
    gpu: str
    row: pred.Prediction | None  # occupancy_predict.predict_row, or None
    why: str = ""  # why there is no row


@dataclass(kw_only=True)
class OccCase:
    params: str
    variants: dict[str, list[OccKernel]]
    ops: dict[str, int]
    short: str = ""


@dataclass(kw_only=True)
class OccRun(StepRun):
    cases: list[OccCase] | None = None
    checked: int = 0  # launches self-checked
    mismatches: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    predicted: list[OccPredicted] = field(default_factory=list)
    measured_gpu: str = ""


@dataclass(kw_only=True)
class Occupancy:
    runs: list[OccRun]


def _group(launches: list[Launch]) -> list[OccKernel]:
    """Launches of one variant and case -> kernels (by name and configuration), largest share first."""
    total = math.fsum(k.duration_ns for k in launches) or 1.0
    groups: dict[tuple, list[Launch]] = {}
    for k in launches:
        cfg = (k.kernel_name, k.grid_size, k.block_size, k.smem_dynamic, k.registers)
        groups.setdefault(cfg, []).append(k)
    out = []
    for ks in groups.values():
        dram = [k.dram_pct for k in ks if k.dram_pct is not None]
        ach = [k.achieved_pct for k in ks if k.achieved_pct is not None]
        out.append(
            OccKernel(
                name=ks[0].kernel_name,
                launches=len(ks),
                share=math.fsum(k.duration_ns for k in ks) / total,
                total_ns=math.fsum(k.duration_ns for k in ks),
                first=ks[0],
                dram_pct=math.fsum(dram) / len(dram) if dram else None,
                achieved_pct=math.fsum(ach) / len(ach) if ach else None,
            )
        )
    out.sort(key=lambda g: (-g.share, g.name))
    return out


def dominant(kernels: list[OccKernel]) -> list[OccKernel]:
    out, acc = [], 0.0
    for g in kernels:
        if acc >= DOMINANT or len(out) >= MAX_KERNELS:
            break
        out.append(g)
        acc += g.share
    return out


def _targets(run: RunView, data: OccupancyData) -> tuple[list[str], dict[str, CheckData]]:
    """The target GPUs (the step's, else one per checked arch) and the checks' data by arch."""
    checks = {s.name.removeprefix("check:cuda-"): CheckData.from_step(s, run.where) for s in run.steps("check:cuda-")}
    named = list(data.target_gpus or []) or pred.default_targets(list(checks))
    return named, checks


def _predict(run: RunView, e: OccRun, data: OccupancyData) -> None:
    names, checks = _targets(run, data)
    e.targets = names
    for gname in names:
        try:
            g = occ.gpu(gname)
        except OptionError as x:
            e.predicted.append(OccPredicted(case="", variant="", kernel="", arch="", gpu=gname, row=None, why=str(x)))
            continue
        arch = next((a for a in checks if occ.arch_cc(a) == g.cc), None)
        recs = pred.check_kernels(checks[arch]) if arch is not None else []
        for c in e.cases or []:
            for v, ks in c.variants.items():
                for k in dominant(ks):
                    p = OccPredicted(case=c.params, variant=v, kernel=k.name, arch=arch or "", gpu=g.name, row=None)
                    if arch is None:
                        p.why = f"no compile check for cc {g.cc} (--check-arch {g.cc.replace('.', '')})"
                    else:
                        rec, p.why = pred.lookup(recs, v, k.name)
                        if rec is not None:
                            p.row = pred.predict_row(k.first, rec, g)
                    e.predicted.append(p)


def _run(run: RunView, order: list[str]) -> OccRun:
    s = run.step(STEP)
    e = OccRun.of(run, STEP, s)
    d = OccupancyData.from_step(s, run.where) if s is not None else None
    if d is None or not d.measured:
        return e
    hidden = set(run.same_code)
    cases = []
    for c in d.cases:
        vs = {v: r for v, r in c.variants.items() if v not in hidden}
        for v, r in vs.items():
            for k in r.launches:
                e.checked += 1
                where = f"{v} {code(kernel_name(k.kernel_name))} (launch {k.id})"
                if k.selfcheck != "ok":
                    f = k.formula
                    got = f.error or f"formula {f.blocks_per_sm} ({f.limiter})"
                    e.mismatches.append(f"{where}: ncu {k.blocks_per_sm}, {got}")
                e.flagged += [f"{where}: {x}" for x in k.flagged]
        cases.append(
            OccCase(
                params=c.params,
                variants={v: _group(vs[v].launches) for v in ordered(vs, order)},
                ops={v: vs[v].ops for v in vs},
            )
        )
    e.cases = cases
    e.measured_gpu = run.gpu
    _predict(run, e, d)
    return e


def evidence(runs: list[RunView], order: list[str]) -> Occupancy:
    return Occupancy(runs=[_run(r, order) for r in runs])  # short case names: collect._shorten


def limiter_words(names: list[str]) -> str:
    return " and ".join(LIMITER.get(n, n) for n in names)


def _f(x: float | None, nd: int = 1) -> str:
    return DASH if x is None else f"{x:.{nd}f}"


def _measured_rows(gpu: list[str], c: OccCase) -> list[list[str]]:
    rows = []
    for v, ks in c.variants.items():
        for k in dominant(ks):
            f = k.first
            smem = f"{int(f.smem_static or 0):,} + {int(f.smem_dynamic or 0):,}"
            rows.append(
                [
                    *gpu,
                    code(c.short),
                    code(v),
                    code(kernel_name(k.name)),
                    f"x{k.launches}, {100 * k.share:.0f} %",
                    f"{int(f.registers)} / {int(f.block_size)} / {int(f.grid_size):,}",
                    smem,
                    f"{f.blocks_per_sm} ({limiter_words(f.limiters)})",
                    f"{_f(f.theoretical_pct)} / {_f(k.achieved_pct)}",
                    _f(f.waves, 2),
                    _f(k.dram_pct),
                    _f(f.l2_hit_pct),
                    _cliff(f.formula.cliff),
                ]
            )
    return rows


def _cliff(cl: Cliff) -> str:
    """'+1: smem -8,272 B; -1: smem +177 B': the shared memory per block (or registers per thread) to
    take away for one block more per SM, and to add for one block less (a resource that cannot do it: left out)."""
    if not cl:  # ABSENT: the formula gave no answer
        return DASH
    parts = []
    for sign, s, r, how in (
        ("+1", cl.shared_memory_to_one_more, cl.registers_to_one_more, "-"),
        ("-1", cl.shared_memory_to_one_less, cl.registers_to_one_less, "+"),
    ):
        got = ([f"smem {how}{int(s):,} B"] if s is not None else []) + (
            [f"regs {how}{int(r)}"] if r is not None else []
        )
        if got:
            parts.append(f"{sign}: {', '.join(got)}")
    return "; ".join(parts) or DASH


def _predicted_rows(gpu: list[str], e: OccRun, c: OccCase) -> list[list[str]]:
    rows = []
    for p in e.predicted:
        if p.case != c.params:
            continue
        r = p.row
        head = [*gpu, p.gpu, f"sm_{p.arch}" if p.arch else DASH, code(p.variant), code(kernel_name(p.kernel))]
        if r is None or r.error is not ABSENT:
            rows.append([*head, DASH, DASH, DASH, DASH, DASH, (r.error if r else "") or p.why])
            continue
        rows.append(
            [
                *head,
                f"{r.registers} / {r.smem_static:,}",
                f"{r.blocks_per_sm} ({r.limiter})",
                _f(r.theoretical_pct),
                _f(r.waves, 2),
                _cliff(r.cliff),
                "",
            ]
        )
    return rows


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.occupancy.runs if ev.occupancy else []
    have = [e for e in runs if e.cases is not None]
    out = not_run([e for e in runs if e.cases is None and e.status != "absent"], multi)
    if not have:
        return out
    inner: list[Block] = []
    logs: list[str] = []
    for e in have:
        logs += e.logs
        if e.status in ("fail", "error"):
            out.append(text(prefix(multi, e.gpu) + "step result: " + state_label(e.status, e.reason)))
    for c in have[0].cases or []:
        inner += _case_tables(have, c, multi)
    inner += _notes(have)
    inner.append(logs_line(logs))
    return [*out, details(_gist(have), inner)]


MEASURED = ["case", "variant", "kernel", "launches, share", "regs / block / grid", "smem static + dynamic B"]
MEASURED += ["blocks/SM (limiter)", "occupancy theor. / achieved %", "waves", "DRAM %", "L2 hit %", "cliff"]
PREDICTED = ["target GPU", "arch", "variant", "kernel", "regs / static smem B", "blocks/SM (limiter)"]
PREDICTED += ["occupancy theor. %", "waves", "cliff", "no prediction"]


def _case_tables(have: list[OccRun], c: OccCase, multi: bool) -> list[Block]:
    """One case: the measured table (every run), then the predicted one, labelled."""
    same = [(e, cc) for e in have for cc in e.cases or [] if cc.params == c.params]
    rows = [r for e, cc in same for r in _measured_rows(gpu_col(multi, e.gpu), cc)]
    out = [text(f"Case {code(c.short)}, measured (ncu):"), table([*gpu_col(multi, "GPU"), *MEASURED], rows)]
    prow = [r for e, cc in same for r in _predicted_rows(gpu_col(multi, e.gpu), e, cc)]
    if prow:
        out.append(text(f"Case {code(c.short)}, predicted (not measured):"))
        out.append(table([*gpu_col(multi, "GPU"), *PREDICTED], prow))
    return out


def _notes(have: list[OccRun]) -> list[Block]:
    out = []
    for e in have:
        ok = e.checked - len(e.mismatches)
        sc = (
            "Self-check: patchkit.occupancy on each launch as measured (ncu's cc, registers, block, shared memory "
            f"and carveout) gives ncu's blocks per SM for {ok} of {e.checked} profiled launches"
        )
        out.append(text(sc + (": differ: " + "; ".join(e.mismatches) if e.mismatches else ".")))
        if e.flagged:
            out.append(text("Impossible values ncu printed (kept, flagged): " + "; ".join(e.flagged)))
        few = [f"{code(v)} {code(c.short)}" for c in e.cases or [] for v, n in c.ops.items() if n < 2]
        if few:
            out.append(
                text(
                    "The profiled launches do not repeat one op's launch sequence twice for "
                    + ", ".join(few)
                    + ": they may not cover a whole op, and the shares may leave out a kernel."
                )
            )
    out.append(
        text(
            "ncu replays each kernel with caches flushed: its durations and shares explain where the time goes, "
            "the kernel timing above times. Shares: of the profiled launches' ncu duration; achieved occupancy and "
            "DRAM % (of peak): the mean over the kernel's launches, the rest its first launch's. Cliff: bytes of "
            "shared memory (or registers per thread) per block to remove for one block more per SM / to add for one "
            "block less (+1 / -1; a resource that cannot do it alone is left out), with the carveout free to "
            "grow as the driver's is. Limits: registers, shared memory "
            "(at the carveout the driver chose), warps, blocks."
        )
    )
    if any(e.predicted for e in have):
        out.append(text(ASSUMPTION))
    return out


def _gist(have: list[OccRun]) -> str:
    n = sum(len(e.cases or []) for e in have)
    bad = sum(len(e.mismatches) for e in have)
    checked = sum(e.checked for e in have)
    tg = sorted({p.gpu for e in have for p in e.predicted if p.row})
    return f"occupancy of {n} cases (ncu), self-check {checked - bad}/{checked}" + (
        f"; predicted for {', '.join(tg)}" if tg else ""
    )


# ---------------------------------------------------------------------------------------------
# The summary's line


def summary_line(ev: Evidence) -> str:
    """E.g. 'Occupancy from `base` to `+0001+0002` (kv=122880): `flash_attn_ext_vec<...>` (`base`) ->
    `flash_attn_ext_f16<...>` (`+0001`, `+0001+0002`): blocks per SM 2 -> 2 -> 4 on the H200 (ncu, registers),
    2 -> 1 -> 3 predicted on an RTX 4070 (shared memory)'. The kernel is the one of the largest share whose
    blocks per SM change between two adjacent variants, in the case with the longest profiled time
    (`_changed`); the line follows it from the first variant to the series' end, and a variant that does not
    launch it (base, before the series picks it) is read at its own largest-share kernel. '' when no
    kernel's blocks per SM change."""
    got = _changed(ev)
    if got is None:
        return ""
    e, c, name = got
    chain = [(v, _at(ks, name)) for v, ks in c.variants.items() if ks]
    names: dict[str, list[str]] = {}
    for v, k in chain:
        names.setdefault(kernel_name(k.name), []).append(code(v))
    end = chain[-1][1]
    what = f" {ARROW} ".join(f"{code(n)} ({', '.join(vs)})" for n, vs in names.items())
    s = (
        f"Occupancy from {code(chain[0][0])} to {code(chain[-1][0])} ({code(c.short)}): {what}: blocks per SM "
        f"{_arrows(k.first.blocks_per_sm for _, k in chain)} on the {e.measured_gpu} (ncu, "
        f"{limiter_words(end.first.limiters)})"
    )
    predicted = False
    for g in e.targets:
        ps = [_pred(e, c.params, v, k.name, g) for v, k in chain]
        if ps[-1] is None or all(p is None for p in ps[:-1]):
            continue
        s += f", {_arrows(p.blocks_per_sm if p else DASH for p in ps)} predicted on an {g} ({ps[-1].limiter})"
        predicted = True
    # a target whose host code picks another kernel (0001 picks this one from cc 8.9 only) is not one the
    # prediction holds for: the line says what it assumes, as the section does
    return s + (f" ({PREDICTED_ASSUMES})." if predicted else ".")


def _arrows(xs) -> str:
    return f" {ARROW} ".join(str(x) for x in xs)


def _at(kernels: list[OccKernel], name: str) -> OccKernel:
    """The variant's kernel of that name (its largest share), else its largest-share kernel."""
    return next((k for k in kernels if kernel_name(k.name) == name), kernels[0])


def _changed(ev: Evidence) -> tuple[OccRun, OccCase, str] | None:
    """(run, case, kernel name) of the kernel of the largest share whose blocks per SM change between two
    adjacent variants, in the case with the longest profiled time."""
    best: tuple | None = None
    for e in ev.occupancy.runs if ev.occupancy else []:
        for c in e.cases or []:
            vs = [v for v in c.variants if c.variants[v]]
            for a, b in itertools.pairwise(vs):
                by_a = {kernel_name(k.name): k for k in dominant(c.variants[a])}
                for k in dominant(c.variants[b]):
                    old = by_a.get(kernel_name(k.name))
                    if old is None or old.first.blocks_per_sm == k.first.blocks_per_sm:
                        continue
                    score = (math.fsum(g.total_ns for g in c.variants[b]), k.share + old.share)
                    if best is None or score > best[0]:
                        best = (score, e, c, kernel_name(k.name))
    return None if best is None else best[1:]


PREDICTED_ASSUMES = (
    "predicted: assumes each target launches this kernel with the block size and dynamic shared memory measured here"
)


def _pred(e: OccRun, case: str, variant: str, kernel: str, gpu: str) -> pred.Prediction | None:
    for p in e.predicted:
        if (p.case, p.variant, p.kernel, p.gpu) == (case, variant, kernel, gpu) and p.row and p.row.error is ABSENT:
            return p.row
    return None


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    return [  # a run made before the step existed (absent): not listed
        Missing("steps", i, f"`{STEP}` on {e.gpu}: {state_label(e.status, e.reason)}")
        for i, e in enumerate(ev.occupancy.runs if ev.occupancy else [])
        if e.status == "not_run" or (e.status == "error" and e.cases is None)
    ]


SECTION = Section("bench:occupancy", STEP, "occupancy", "Occupancy", evidence, markdown, not_tested, shown_empty=False)
