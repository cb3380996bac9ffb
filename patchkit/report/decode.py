"""`bench:decode`: llama-bench t/s per variant and test (pp/tg, depth, micro-batch), speedups against base.

Rows are llama-bench's tests, each its own row, never merged: a run with pp and tg at two depths has four
tests per variant (rows of older results.json files get their `test` when read: patchkit.results.upgrade).
Each row is linked to its ratio against base (vs_base): by variant, test and depth, the n-th row of those
with the n-th ratio (several micro-batches give rows of the same test name).
"""

from __future__ import annotations

from typing import Any

import patchkit.report.intervals as intervals
from patchkit.measure import hooks
from patchkit.measure import model as model_mod
from patchkit.report.evidence import Decode, DecodeData, DecodeRatio, DecodeRow, DecodeRun, Evidence
from patchkit.report.fmt import (
    DASH,
    Block,
    code,
    details,
    interval,
    local_path,
    logs_line,
    not_run,
    num,
    pct,
    plural,
    portable_args,
    prefix,
    state_label,
    table,
    text,
    verdict_word,
)
from patchkit.report.kernel import compare_lines, upstream_db
from patchkit.report.part import Missing, Section, not_run_lines, variants_lacking
from patchkit.report.runview import RunView
from patchkit.results import upstreamdb
from patchkit.results.data import ABSENT
from patchkit.results.data import decode as Stored
from patchkit.results.data.base import dump

STEP = "bench:decode"
STATS = ("samples_ts", "avg_ts", "stddev_ts", "median", "ci_low", "ci_high")
IDENTITY = ("type_k", "type_v", "n_gen", "n_prompt", "n_batch", "n_ubatch", "model_type", "n_gpu_layers")
RATIO_KEYS = ("variant", "depth", "ratio", "ci_low", "ci_high", "verdict", "type_k", "type_v", "n_gen")


def key(x: DecodeRow) -> tuple:
    """A row's test identity (without the variant)."""
    return (x.test, x.depth, *(str(getattr(x, k)) for k in IDENTITY))


def _v(x: Any) -> Any:
    """A stored value, None where an older run did not write it (ABSENT)."""
    return None if x is ABSENT else x


def _row(run: RunView, x: Stored.DecodeCell) -> DecodeRow:
    ident = {k: _v(getattr(x, k)) for k in IDENTITY}
    ident["n_prompt"] = ident["n_prompt"] or 0
    return DecodeRow(
        variant=x.variant,
        test=str(_v(x.test) or ""),
        depth=x.depth,
        **ident,
        **{k: getattr(x, k) for k in STATS},
        log=run.log(x.log),
        logs=run.logs(x.logs or [x.log]),
    )


def _ratio(v: Stored.DecodeRatio) -> DecodeRatio:
    d = v.to_dict()
    more = {k: x for k, x in d.items() if k not in (*RATIO_KEYS, "test")}
    return DecodeRatio(test=str(v.test), **{k: d.get(k) for k in RATIO_KEYS}, interval=more)


def _link(rows: list[DecodeRow], ratios: list[DecodeRatio]) -> None:
    """Each row gets its ratio against base (see the module docstring)."""
    seen: dict[tuple, int] = {}
    by: dict[tuple, DecodeRatio] = {}
    for v in ratios:
        k = (v.variant, v.test, v.depth)
        by[(*k, seen.get(k, 0))] = v
        seen[k] = seen.get(k, 0) + 1
    seen.clear()
    for x in rows:
        k = (x.variant, x.test, x.depth)
        x.ratio = by.get((*k, seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1


def _real(run: RunView, d: Stored.DecodeData, r: Stored.DecodeReal) -> DecodeData:
    """The real model's cells as a table of their own (same rounds, A/A copy and timing as the matrix)."""
    hidden = set(run.same_code)
    rows = [_row(run, x) for x in r.rows]
    ratios = [_ratio(v) for v in r.vs_base]
    _link(rows, ratios)
    floors = [float(a.floor) for a in r.aa if a.floor is not ABSENT]
    return DecodeData(
        model={**r.model, "label": model_mod.label(r.model)},
        model_path=r.model_path,
        argvs=[r.argv],
        rounds=_v(d.rounds),
        rows=[x for x in rows if x.variant not in hidden],
        vs_base=[v for v in ratios if v.variant not in hidden],
        noise_floor=max(floors, default=None),
        aa=[a.to_dict() for a in r.aa],
        aa_label=_v(d.aa_label) or "",
        timing=d.timing.to_dict() if d.timing else None,
        rounds_run=_v(d.rounds_run),
        note=r.note or None,
    )


def _data(run: RunView, d: Stored.DecodeData) -> DecodeData:
    hidden = set(run.same_code)
    rows = [_row(run, x) for x in d.rows]
    ratios = [_ratio(v) for v in _v(d.vs_base) or []]
    _link(rows, ratios)
    return DecodeData(
        model=_v(d.model) or {},
        model_path=_v(d.model_path),
        argvs=_v(d.argvs) or [],
        rounds=_v(d.rounds),
        rows=[x for x in rows if x.variant not in hidden],
        vs_base=[v for v in ratios if v.variant not in hidden],
        upstream_db=upstream_db(run, {"upstream_db": dump(_v(d.upstream_db))}),
        noise_floor=_v(d.noise_floor),
        aa=[a.to_dict() for a in _v(d.aa) or []],
        aa_label=_v(d.aa_label) or "",
        timing=d.timing.to_dict() if d.timing else None,
        rounds_run=_v(d.rounds_run),
        clocks=d.clocks.to_dict() if d.clocks else None,
        hooks=_v(d.hooks),
        real=_real(run, d, d.real) if d.real is not ABSENT else None,
        real_missing=_v(d.real_missing),
    )


def _run(run: RunView) -> DecodeRun:
    s = run.step(STEP)
    e = DecodeRun.of(run, STEP, s)
    if s is not None and (d := Stored.DecodeData.from_step(s, run.where)).measured:
        e.measured = _data(run, d)
    return e


def evidence(runs: list[RunView], order: list[str]) -> Decode:
    return Decode(runs=[_run(r) for r in runs])


def tests_of(m: DecodeData, order: list[str]) -> list[tuple[tuple, dict[str, DecodeRow]]]:
    """(test identity, variant -> row), tests in the order llama-bench ran them, variants in `order`."""
    rank = {v: i for i, v in enumerate(order)}
    out: dict[tuple, dict[str, DecodeRow]] = {}
    for x in m.rows:
        out.setdefault(key(x), {})[x.variant] = x
    return [(k, dict(sorted(by.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))) for k, by in out.items()]


# ---------------------------------------------------------------------------------------------
# Markdown


def model_short(m: DecodeData) -> str:
    """The Model cell for rows without llama-bench's model_type: 'llama 84.9M f16'."""
    d = m.model
    parts = [str(d["arch"])] if d.get("arch") else []
    if d.get("n_params"):
        parts.append(f"{d['n_params'] / 1e6:.1f}M")
    if d.get("weight_type"):
        parts.append(str(d["weight_type"]))
    return " ".join(parts) or local_path(m.model_path or DASH)


def _model_cell(x: DecodeRow, m: DecodeData) -> str:
    """llama-bench's model type, with the synthetic model's size where llama.cpp prints '?B' (at this base the
    llama arch's size class comes from the layer count alone, src/models/llama.cpp; no GGUF key sets it).
    Runs before issue 27 show the cell as recorded."""
    if not x.model_type:
        return model_short(m)
    if per_cell(m) and (lab := model_mod.label(m.model)):  # issue 36: from the model's description
        return lab
    n = m.model.get("n_params")
    if m.noise_floor is not None and "?B" in str(x.model_type) and n:
        return f"{x.model_type}, {n / 1e9:.2f}B params"
    return str(x.model_type)


def model_line(m: DecodeData) -> str:
    """The model in one line: its shape and file (name only), not a dump of its description."""
    d = m.model
    parts = []
    if d.get("arch"):
        parts.append(("synthetic " if d.get("synthetic") else "") + str(d["arch"]))
    for k, label in (("n_layer", "layers"), ("n_embd", "n_embd"), ("n_ff", "n_ff"), ("n_vocab", "vocab")):
        if d.get(k):
            parts.append(f"{d[k]} {label}" if k == "n_layer" else f"{label} {d[k]}")
    if d.get("n_head"):
        gqa = f", GQA {d['n_gqa']}" if d.get("n_gqa") else ""
        parts.append(f"{d['n_head']} heads / {d.get('n_head_kv', DASH)} KV heads{gqa}")
    if d.get("head_dim"):
        parts.append(f"head dim {d['head_dim']}")
    if d.get("weight_type"):
        parts.append(f"{d['weight_type']} weights")
    if d.get("n_params"):
        parts.append(f"{d['n_params'] / 1e6:.1f}M params")
    path = m.model_path or d.get("path")
    where = [code(local_path(path))] if path else []
    if d.get("sha256"):
        where.append(f"sha256 {code(str(d['sha256'])[:12])}")
    s = ", ".join(parts) if parts else "not described"
    return s + (f" ({', '.join(where)})" if where else "")


def _ts(x: DecodeRow | None) -> str:
    return f"{num(x.median, 'ts')} {interval(x.ci_low, x.ci_high, 'ts')}" if x else DASH


def _speedup(r: DecodeRatio | None) -> list[str]:
    if r is None:
        return [DASH, DASH]
    word = verdict_word(r.verdict)
    if r.interval.get("floor") is not None:  # issue 36: the cell's own A/A floor
        word += f" (floor {pct(100 * float(r.interval['floor']))})"
    return [f"{num(r.ratio, 'ratio')} {interval(r.ci_low, r.ci_high, 'ratio')}", word]


def per_cell(m: DecodeData) -> bool:
    """Verdicts against each cell's own A/A floor (runs since issue 36)."""
    return any(v.interval.get("floor") is not None for v in m.vs_base) or any("floor" in a for a in m.aa)


FOLDED = "same"  # the verdict whose cells are folded into one line (settled, no change: a range is enough)
FOLD_CAPTION = (
    "Cells judged 'same' at one test and depth are folded into one row per variant: their micro-batch sizes, "
    "the lowest to highest median t/s and speedup, and their floors; every other verdict has its own row."
)


def _rows(e: DecodeRun, m: DecodeData, order: list[str], base: str, kv: bool) -> list[list[str]]:
    """One row per cell and variant pair, in the order llama-bench ran them; a variant's cells judged 'same' at
    one test and depth (their micro-batches) folded into one row where two or more are (`_folded`); noisy, too
    few samples, faster and slower always shown, each on its own row."""
    out: list[list[str] | tuple] = []
    same: dict[tuple, list[tuple[DecodeRow | None, DecodeRow]]] = {}
    for _, by in tests_of(m, order):
        any_row = next(iter(by.values()))
        lead = [e.gpu, _model_cell(any_row, m), str(any_row.n_ubatch or DASH), any_row.test]
        if kv:
            lead.append(f"{any_row.type_k}/{any_row.type_v}")
        others = [v for v in by if v != base]
        if not others:
            out.append([*lead, _ts(by.get(base))])
        for v in others:
            r = by[v].ratio
            if r is not None and r.verdict == FOLDED:
                k = (v, *lead[:2], *lead[3:])
                if k not in same:
                    out.append(k)
                    same[k] = []
                same[k].append((by.get(base), by[v]))
                continue
            out.append([*lead, code(v), _ts(by.get(base)), _ts(by[v]), *_speedup(r)])
    return [x if isinstance(x, list) else _folded(x, same[x]) for x in out]


def _span(xs: list[float], kind: str) -> str:
    lo, hi = min(xs), max(xs)
    return num(lo, kind) if num(lo, kind) == num(hi, kind) else f"{num(lo, kind)} to {num(hi, kind)}"


def _folded(k: tuple, cells: list[tuple[DecodeRow | None, DecodeRow]]) -> list[str]:
    """A variant's 'same' cells of one test and depth: one cell as it is, several as one row of ranges (the
    micro-batches listed, the medians' and speedups' lowest to highest, the floors' range)."""
    v, gpu, model, *rest = k
    if len(cells) == 1:
        ref, x = cells[0]
        return [gpu, model, str(x.n_ubatch or DASH), *rest, code(v), _ts(ref), _ts(x), *_speedup(x.ratio)]
    ubs = ", ".join(str(x.n_ubatch or DASH) for _, x in cells) + f" ({len(cells)} cells)"
    refs = [ref.median for ref, _ in cells if ref is not None]
    ratios = [x.ratio for _, x in cells if x.ratio is not None]
    floors = [float(r.interval["floor"]) for r in ratios if r.interval.get("floor") is not None]
    word = verdict_word(FOLDED) + (f" (floors {_span([100 * f for f in floors], 'pct')} %)" if floors else "")
    return [
        gpu,
        model,
        ubs,
        *rest,
        code(v),
        _span(refs, "ts") if refs else DASH,
        _span([x.median for _, x in cells], "ts"),
        _span([r.ratio for r in ratios], "ratio"),
        word,
    ]


def _captions(have: list[tuple[DecodeRun, DecodeData]], base: str, kv: bool, multi: bool) -> list[str]:
    rows = [x for _, m in have for x in m.rows]
    ns = [len(x.samples_ts) for x in rows]
    entries = [v.interval for _, m in have for v in m.vs_base]
    cell = "the stored interval of the median" if intervals.is_exact(entries) else intervals.median_caption(ns)
    out = [
        f"t/s: median [{cell}], {intervals.n_range(ns)} samples per cell; "
        f"speedup = t/s(variant) / t/s({base}), > 1 is faster."
    ]
    if entries:
        out.append("Speedup intervals: " + intervals.caption(entries, [len(x.samples_ts) for x in rows]) + ".")
        floors = [m.noise_floor for _, m in have if m.noise_floor is not None]
        if any(per_cell(m) for _, m in have):
            out.append(_cell_caption(have, base))
        else:
            cap = intervals.verdict_caption(entries, max(floors) if floors else None, base=base)
            out.append("Verdicts: " + cap + ".")
    if not kv:
        kvs = sorted({f"{x.type_k}/{x.type_v}" for x in rows})
        out.append(f"K/V cache: {', '.join(kvs)} in every test.")
    if any(x.n_ubatch is None for x in rows):
        out.append("Microbatch `-`: not recorded in this run's results (llama-bench's default).")
    for e, m in have:
        pre = prefix(multi, e.gpu)
        out.append(pre + "Model: " + model_line(m) + ".")
        out += [pre + c for c in _aa_lines(m) + _per_token(m, base)]
        if m.timing:
            t = m.timing
            out.append(
                pre + f"Rounds: {t['min_rounds']} to {max(t['min_rounds'], t['max_rounds'])} interleaved rounds with "
                f"an A/A copy of {base} ({m.rounds_run} run); a test settled at a relative noise of at most "
                f"{pct(100 * float(t['max_noise']))} of every binary's t/s samples."
            )
        shown = "; ".join(code(" ".join(portable_args(a))) for a in m.argvs)
        n = len(m.argvs)
        each = "llama-bench arguments: " if n < 2 else f"llama-bench arguments ({n} processes a round): "
        if m.argvs and m.timing:
            out.append(pre + each + shown + ".")
        elif m.argvs:
            rounds = f"; {plural(int(m.rounds), 'interleaved round')}" if m.rounds else ""
            out.append(pre + each + shown + rounds + ".")
        if e.status in ("fail", "error"):
            out.append(pre + "step result: " + state_label(e.status, e.reason))
    return out


def _cell_caption(have: list[tuple[DecodeRun, DecodeData]], base: str) -> str:
    """How a cell's verdict is reached against its own floor (issue 36), said once."""
    caps = sorted({float(m.timing.get("max_floor") or 0) for _, m in have if m.timing})
    cap = f"above {', '.join(pct(100 * c) for c in caps)}" if any(caps) else "with no limit set"
    return (
        f"Verdicts per cell, against the cell's own A/A floor (in brackets: the edge of the interval of "
        f"t/s({base}'s copy) / t/s({base}) farthest from 1, at the cell's samples): 'same' when the speedup's "
        f"interval lies inside [1 - floor, 1 + floor], 'faster' or 'slower' when it lies wholly outside; 'noisy' "
        f"when it straddles an edge of that band after the cell's rounds, or the floor is {cap} (max-floor); "
        f"'too few samples' when the interval's exact coverage is below 95 % (fewer than 4 samples a side)."
    )


def _aa_lines(m: DecodeData) -> list[str]:
    """The A/A floor and each test's A/A ratio (runs with an A/A copy of base only)."""
    if m.noise_floor is None:
        return []
    if per_cell(m):
        fl = [float(a["floor"]) for a in m.aa if "floor" in a]
        span = f"{pct(100 * min(fl))} to {pct(100 * max(fl))}" if fl else DASH
        lab = code(m.aa_label or "base#2")
        line = f"A/A floors per cell ({lab} against base, {len(fl)} cells): {span}"
        return [line + ".", *hooks.summaries(hooks.stored(m.hooks, m.clocks))]
    each = ", ".join(f"{a['test']} {num(a['ratio'], 'ratio')}" for a in m.aa)
    lab = code(m.aa_label or "base#2")
    line = f"A/A noise floor {pct(100 * float(m.noise_floor))}: the largest |t/s({lab}) / t/s(base) - 1| ({each})"
    return [line + "; a verdict is 'same' inside it.", *hooks.summaries(hooks.stored(m.hooks, m.clocks))]


def _per_token(m: DecodeData, base: str) -> list[str]:
    """ms per token and us per layer of each tg test of base (new runs: the model's layer count known)."""
    n_layer = m.model.get("n_layer") if m.noise_floor is not None else None
    tg = [x for x in m.rows if x.variant == base and x.n_gen and not x.n_prompt and x.median]
    if not n_layer or not tg:
        return []
    cells = [f"{x.test} {1e3 / x.median:.3f} ms, {1e6 / x.median / int(n_layer):.1f} us a layer" for x in tg]
    head = f"Per token ({base}, {n_layer} layers; a layer's share includes the output head): "
    return [head + "; ".join(cells) + "."]


def _gist(have: list[tuple[DecodeRun, DecodeData]], order: list[str]) -> str:
    tests = list(dict.fromkeys(x.test for _, m in have for x in m.rows))
    variants = [v for v in order if any(x.variant == v for _, m in have for x in m.rows)]
    shown = ", ".join(tests[:6]) + (", ..." if len(tests) > 6 else "")
    s = f"llama-bench: {plural(len(tests), 'test')} ({shown}) x {plural(len(variants), 'variant')}"
    floors = sorted({m.noise_floor for _, m in have if m.noise_floor is not None})
    if any(per_cell(m) for _, m in have):
        words = [verdict_word(v.verdict) for _, m in have for v in m.vs_base]
        counts = ", ".join(f"{words.count(w)} {w}" for w in dict.fromkeys(sorted(words)))
        return s + (f"; per-cell verdicts: {counts}" if counts else "")
    return s + (f"; A/A noise floor {', '.join(pct(100 * f) for f in floors)}" if floors else "")


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.decode.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    order = [v for v in ev.variants if any(x.variant == v for _, m in have for x in m.rows)]
    order += sorted({x.variant for _, m in have for x in m.rows} - set(order))
    base = "base" if "base" in order else order[0]
    kv = len({(x.type_k, x.type_v) for _, m in have for x in m.rows}) > 1
    rows, logs = [], []
    for e, m in have:
        logs += e.logs
        rows += _rows(e, m, order, base, kv)
    cpu = all(e.gpu.startswith("CPU only") for e, _ in have)  # a CPU run's column names the CPU, no GPU words
    header = ["CPU" if cpu else "GPU", "Model", "Microbatch size", "Test", *(["K/V"] if kv else [])]
    header += [f"t/s {base}"] if len(order) == 1 else ["variant", f"t/s {base}", "t/s variant", "Speedup", "verdict"]
    caps = _captions(have, base, kv, multi)
    if any(r[2].endswith(" cells)") for r in rows):
        caps.insert(0, FOLD_CAPTION)
    inner = [table(header, rows), logs_line(logs), *[text(c) for c in caps]]
    prefixes = {r.gpu: r.log_prefix for r in ev.runs}
    for e, m in have:
        inner += compare_lines(multi, e.gpu, prefixes.get(e.gpu, ""), m.upstream_db, upstreamdb.LLAMA_BENCH)
    for e, m in have:
        if m.real is not None:
            inner += real_blocks(e, m, order, base, multi)
    plots = [f"![decode t/s by depth]({ev.plot})"] if ev.plot else []
    plots += [f"![pp speedup by micro-batch]({ev.plot_ubatch})"] if ev.plot_ubatch else []
    if plots:  # side by side: one paragraph
        inner.append(text(" ".join(plots)))
    return [*out, details(_gist(have, order), inner)]


def real_blocks(e: DecodeRun, m: DecodeData, order: list[str], base: str, multi: bool) -> list[Block]:
    """The real model's own table (docs/decode-matrix.md), headed by its label from the GGUF header, with a line
    saying what it exercises (its attention against the matrix model's) and the recipe's note."""
    r = m.real
    assert r is not None
    lab = model_mod.label(r.model)
    kv = len({(x.type_k, x.type_v) for x in r.rows}) > 1
    header = ["CPU" if e.gpu.startswith("CPU only") else "GPU", "Model", "Microbatch size", "Test"]
    header += [*(["K/V"] if kv else []), "variant", f"t/s {base}", "t/s variant", "Speedup", "verdict"]
    logs = list(dict.fromkeys(x for row in r.rows for x in row.logs))
    lines = [exercises_line(r, m)] + ([r.note] if r.note else []) + _aa_lines(r)
    if r.model.get("repack_off"):  # a CPU with AMX-INT8 (measure.tool.repack_off)
        lines.append(f"Every variant ran it with {r.model['repack_off']}.")
    lines.append(
        "llama-bench arguments (one more process a binary and round): "
        + code(" ".join(portable_args(r.argvs[0])))
        + "."
    )
    return [
        text(f"{prefix(multi, e.gpu)}**Decode on {lab}** (a real model; its cells ran in the rounds above):"),
        table(header, _rows(e, r, order, base, kv)),
        logs_line(logs),
        *[text(x) for x in lines],
    ]


def exercises_line(r: DecodeData, m: DecodeData) -> str:
    """What the real model exercises: its attention shape from its header, K/V types and tests, against the matrix
    model's GQA where the two differ."""
    d = r.model
    kvs = ", ".join(sorted({f"{x.type_k}/{x.type_v}" for x in r.rows}))
    one = {x.test: x.n_prompt and x.n_ubatch and x.n_prompt <= x.n_ubatch for x in r.rows}
    tests = ", ".join(t + (" (in one micro-batch)" if one[t] else "") for t in one)
    s = f"What it exercises: {model_mod.shape_line(d)} (from its GGUF header); K/V cache {kvs}; {tests} at depth 0"
    g, g0 = d.get("n_gqa"), m.model.get("n_gqa") or _gqa(m.model)
    if g and g0 and g != g0:
        s += (
            f"; its GQA {g} is not the matrix model's GQA {g0}: a kernel choice keyed to GQA can differ between the two"
        )
    return s + "."


def _gqa(d: dict) -> int | None:
    h, kv = d.get("n_head"), d.get("n_head_kv")
    return h // kv if isinstance(h, int) and isinstance(kv, int) and kv else None


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    """Not run; per run the variants not measured, the depths measured (and those asked for but missing)."""
    out = not_run_lines("steps", STEP, ev.decode.runs)
    for i, (r, de) in enumerate(zip(runs, ev.decode.runs)):
        rows = de.measured.rows if de.measured else []
        out += variants_lacking(STEP, i, r, ev.variants, {x.variant for x in rows})
        if de.measured and rows:
            depths = sorted({x.depth for x in rows})
            out.append(Missing("coverage", i, f"Decode on {r.gpu}: depths {', '.join(str(d) for d in depths)} only."))
            wanted = ",".join(_arg(a, "-d") or "" for a in de.measured.argvs)
            lack_d = sorted({d for d in wanted.split(",") if d.strip().isdigit() and int(d) not in depths}, key=int)
            if lack_d:
                out.append(
                    Missing("coverage", i, f"Decode on {r.gpu}: requested depths with no result: {', '.join(lack_d)}.")
                )
            if de.measured.real_missing:
                why = de.measured.real_missing
                out.append(Missing("coverage", i, f"Decode on the real model on {r.gpu}: not run: {why}"))
            if any(len(x.samples_ts) < 2 for x in rows):
                out.append(Missing("coverage", i, f"Decode on {r.gpu}: some cells have one sample only (no interval)."))
    return out


SECTION = Section("bench:decode", STEP, "decode", "Decode", evidence, markdown, not_tested)
