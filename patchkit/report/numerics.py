"""`numerics`: greedy generations of variant pairs compared for bit-identity, and their KL divergence."""

from __future__ import annotations

import dataclasses

from patchkit.measure import numerics as numerics_data
from patchkit.measure.model import shape_line
from patchkit.measure.numerics import Generation, PairResult
from patchkit.report.evidence import Evidence, Numerics, NumericsData, NumericsRun, Pair
from patchkit.report.fmt import (
    DASH,
    Block,
    bullets,
    code,
    details,
    gpu_col,
    logs_line,
    not_run,
    num,
    prefix,
    table,
    yes_no,
)
from patchkit.report.part import Missing, Section, not_run_lines
from patchkit.report.runview import RunView
from patchkit.results.data import ABSENT

STEP = "numerics"
GEN_HEADER = [
    "pair",
    "depth",
    "prompt",
    "identical",
    "first diff (char)",
    "first diff (token)",
    "sha256 a",
    "sha256 b",
]
KLD_HEADER = ["pair", "mean KLD", "99 % KLD", "max KLD", "same top p"]


def _shown(run: RunView, g: Generation) -> Generation:
    """A generation as the report shows it: its logs from the report's folder, a key an older run did not
    write as today's writer says 'none' (Generation.SHOWN)."""
    older = {k: v for k, v in Generation.SHOWN.items() if getattr(g, k) is ABSENT}
    return dataclasses.replace(g, **older, log_a=run.log(g.log_a), log_b=run.log(g.log_b))


def _pair(run: RunView, p: PairResult) -> Pair:
    gens = [_shown(run, g) for g in p.generations]
    kld = {k: v for k, v in p.kld.to_dict().items() if v is not None and v != ""} if p.kld else None
    if kld and kld.get("log"):
        kld["log"] = run.log(kld["log"])
    return Pair(a=p.a, b=p.b, identical=p.identical, generations=gens, kld=kld)


def _run(run: RunView) -> NumericsRun:
    s = run.step(STEP)
    e = NumericsRun.of(run, STEP, s)
    r = numerics_data.NumericsData.from_step(s, run.where) if s is not None else None
    if r is not None and r.measured:
        hidden = set(run.same_code)
        model = r.model or {}  # the model's own description (patchkit.measure.model)
        pairs = [p for p in r.pairs if p.a not in hidden and p.b not in hidden]
        same = run.compiles_to_base
        e.measured = NumericsData(
            pairs=[_pair(run, p) for p in pairs],
            depths=r.depths or [],
            prompts=r.prompts or [],
            n_predict=r.n_predict or 0,
            model=str(model.get("label", "")),
            shape=shape_line(model) if model.get("head_dim") else "",
            shape_from="" if model.get("synthetic", True) else ", from its GGUF header",
            licence=str(model.get("licence", "")),
            text=r.text or "",
            repack_off=str(model["repack_off"]) if model.get("repack_off") else None,
            same_code={v: same[v] for p in pairs for v in (p.a, p.b) if v in same},
        )
    return e


def evidence(runs: list[RunView], order: list[str]) -> Numerics:
    return Numerics(runs=[_run(r) for r in runs])


def _summary(pre: str, pair: str, p: Pair) -> str:
    n_diff = sum(1 for g in p.generations if g.identical is False)
    n_err = sum(1 for g in p.generations if g.identical is None)
    if p.generations and n_err == len(p.generations):  # nothing compared: neither identical nor not
        errs = sorted({g.error for g in p.generations if g.error})
        return f"{pre}{pair}: not compared (none of its {n_err} generations ran" + (
            f": {'; '.join(errs)})." if errs else ")."
        )
    s = f"{pre}{pair}: " + ("bit-identical" if p.identical else "not bit-identical")
    return (
        s
        + f" ({n_diff} of {len(p.generations)} generations differ"
        + (f", {n_err} not compared" if n_err else "")
        + ")."
    )


def _gen_row(gpu: list[str], pair: str, g: Generation) -> list[str]:
    ident = yes_no(g.identical) if g.identical is not None else "not compared" + (f": {g.error}" if g.error else "")
    return [
        *gpu,
        pair,
        str(g.depth),
        str(g.prompt),
        ident,
        DASH if g.first_diff_char is None else str(g.first_diff_char),
        DASH if g.first_diff_token is None else str(g.first_diff_token),
        code(g.sha256_a[:12]) if g.sha256_a else DASH,
        code(g.sha256_b[:12]) if g.sha256_b else DASH,
    ]


def _kld_row(gpu: list[str], pair: str, k: dict[str, float | str] | None) -> list[str]:
    if not k:
        return [*gpu, pair, "not measured", DASH, DASH, DASH]
    if "mean" not in k:
        return [*gpu, pair, "not measured" + (f": {k['error']}" if k.get("error") else ""), DASH, DASH, DASH]
    return [
        *gpu,
        pair,
        num(k.get("mean"), "kld"),
        num(k.get("p99"), "kld"),
        num(k.get("max"), "kld"),
        DASH if k.get("same_top_p") is None else num(k["same_top_p"], "pct"),
    ]


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.numerics.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    gen_rows, kld_rows, logs, kld_logs, summary = [], [], [], [], []
    for e, m in have:
        pre, gpu = prefix(multi, e.gpu), gpu_col(multi, e.gpu)
        logs += e.logs
        if e.status == "error":  # the step's own state, with what it measured below
            summary.append(pre + f"`{STEP}` ended in error: {e.reason}")
        summary += [pre + x for x in _model_lines(m)]
        if not m.pairs:
            summary.append(pre + "no pair compared (no variant besides base).")
        for p in m.pairs:
            pair = f"{code(p.a)} vs {code(p.b)}"
            summary.append(_summary(pre, pair, p))
            for g in p.generations:
                logs += [g.log_a, g.log_b]
                gen_rows.append(_gen_row(gpu, pair, g))
            if p.kld:
                kld_logs.append(p.kld.get("log"))
            kld_rows.append(_kld_row(gpu, pair, p.kld))
    inner: list[Block] = [bullets(summary)] if summary else []
    if gen_rows:
        inner += [table([*gpu_col(multi, "GPU"), *GEN_HEADER], gen_rows), logs_line(logs)]
    if kld_rows:
        inner += [table([*gpu_col(multi, "GPU"), *KLD_HEADER], kld_rows), logs_line(kld_logs)]
    return [*out, details(_gist(have), inner)]


def _model_lines(m: NumericsData) -> list[str]:
    """Which model the tables used, what its attention is, its licence, the text; why same-code pairs agree."""
    out: list[str] = []
    if not m.text:  # a run before format 3 (synthetic text): its report as it was
        return out
    if m.model:
        out.append(
            f"Model: {m.model}"
            + (f" ({m.shape}, from its GGUF header)" if m.shape else "")
            + (f"; licence: {m.licence}" if m.licence else "")
            + "."
        )
    if m.text:
        out.append(f"Text (the long-depth prefix and the KL divergence's): {m.text}.")
    if m.repack_off:
        out.append(f"Every variant ran with {m.repack_off}.")
    if m.prompts and m.model:
        out.append("Prompts: " + "; ".join(f"{i}: {code(str(p))}" for i, p in enumerate(m.prompts)) + ".")
    for v, why in sorted(m.same_code.items()):
        out.append(
            f"{code(v)} compiles to base's code ({why}): bit-identical text is expected, and a KLD at the floor of "
            "llama-perplexity's own storage of base's log-probabilities (16-bit values), so near 0 but not exactly 0."
        )
    return out


def first_diff(p: Pair) -> Generation | None:
    """The first generation (in the stored order) that differs, None if none does."""
    return next((g for g in p.generations if g.identical is False), None)


def pair_result(p: Pair) -> str:
    """'bit-identical (4 generations)' or '1 of 4 generations differ (first at char 11)'."""
    n = len(p.generations)
    if p.identical:
        return f"bit-identical ({n} generation{'s' if n != 1 else ''})"
    g = first_diff(p)
    n_diff = sum(1 for x in p.generations if x.identical is False)
    where = f" (first at char {g.first_diff_char})" if g and g.first_diff_char is not None else ""
    if where and g and g.first_diff_token is not None:
        where = where[:-1] + f", token {g.first_diff_token})"
    if not n_diff:
        return "not compared"
    return f"{n_diff} of {n} generations differ{where}"


def _gist(have: list[tuple[NumericsRun, NumericsData]]) -> str:
    m0 = have[0][1]
    depths = ", ".join(str(d) for d in m0.depths or [])
    n = sum(len(m.pairs) for _, m in have)
    return (
        f"greedy generations of {n} variant pair{'s' if n != 1 else ''}"
        + (f" at depths {depths}" if depths else "")
        + ", KL divergence"
    )


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    """Not run; the pairs whose KL divergence was not measured."""
    out = not_run_lines("steps", STEP, ev.numerics.runs)
    for i, e in enumerate(ev.numerics.runs):
        for p in e.measured.pairs if e.measured else []:
            if not p.kld or "mean" not in p.kld:
                out.append(
                    Missing(
                        "results",
                        i,
                        f"Numerics on {e.gpu}, {p.a} vs {p.b}: KL divergence not measured"
                        + (f" ({p.kld['error']})." if p.kld and p.kld.get("error") else "."),
                    )
                )
    return out


SECTION = Section("numerics", STEP, "numerics", "Numerics", evidence, markdown, not_tested)
