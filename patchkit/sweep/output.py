"""What a sweep shows, made from the stored results only (sweep.json and points/*.json):

out/sweep.md     the table: point, valid or why not, time per case, ratio vs the starting row
                 with its interval, verdict
out/heatmap.png  the objective ratio (or, unmeasured, valid/invalid) over two parameters
out/best.patch   the best point's patch, when it is faster than the starting row beyond the A/A
                 floor (git am applies it on the base + start variant: add it to the series)
out/section.md   the report's "Parameter sweep" section
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from patchkit.build.table import format_value
from patchkit.measure import stats
from patchkit.sweep import occupancy as predicted
from patchkit.sweep.check import invalid_reason
from patchkit.sweep.search import Compared, Timing, compare
from patchkit.sweep.store import Store
from patchkit.workspace import read_json, write_atomic


@dataclass(frozen=True, kw_only=True)
class View:
    """One point as the stored results say."""

    name: str
    values: dict
    reference: bool
    checked: bool  # compile-checked for every arch of the plan
    invalid: str  # why not valid ('' when valid or not known)
    rung: str = ""  # the deepest rung it was timed in
    rung_index: int = -1
    timing: Timing | None = None
    compared: Compared | None = None


def _timing_of(rec: dict, rung: str) -> Timing | None:
    t = rec.get("timing", {}).get(rung)
    return Timing.from_dict(t) if t else None


def views(plan: dict, records: dict[str, dict]) -> list[View]:
    """Every point of the stored plan with its stored check and timing (deepest rung it reached)."""
    rungs = plan.get("rungs", [])
    ref_name = plan["points"][0]["name"]
    ref_rec = records.get(ref_name, {})
    out = []
    for p in plan["points"]:
        rec = records.get(p["name"], {})
        checks = rec.get("check", {})
        why = invalid_reason(rec)
        idx = max((i for i, r in enumerate(rungs) if r in rec.get("timing", {})), default=-1)
        t = _timing_of(rec, rungs[idx]) if idx >= 0 else None
        cmp = None
        if t is not None and not t.ok:
            why = why or f"timing: {t.error}"
        elif t is not None and not p["reference"]:
            ref_t = _timing_of(ref_rec, rungs[idx])
            aa = ref_rec.get("timing", {}).get(rungs[idx], {}).get("aa")
            if ref_t is not None and ref_t.ok:
                cmp = compare(ref_t, Timing.from_dict(aa) if aa else None, t, plan["spec"]["objective"])
        out.append(
            View(
                name=p["name"],
                values=p["values"],
                reference=p["reference"],
                checked=all(a in checks for a in plan["archs"]) or bool(why),
                invalid=why,
                rung=rungs[idx] if idx >= 0 else "",
                rung_index=idx,
                timing=t,
                compared=cmp,
            )
        )
    return out


def best(vs: list[View], rungs: list[str]) -> View | None:
    """The point with the lowest objective ratio among those timed in the last rung."""
    last = len(rungs) - 1
    timed = [v for v in vs if v.compared is not None and v.rung_index == last and not v.invalid]
    return min(timed, key=lambda v: (v.compared.ratio.ratio, v.name)) if timed else None  # type: ignore[union-attr]


def _cases(vs: list[View]) -> list[str]:
    return sorted({c for v in vs if v.timing is not None for c in v.timing.samples})


def _verdict(v: View, rungs: list[str]) -> str:
    if v.invalid:
        return "invalid"
    if v.reference:
        return "reference"
    if v.compared is None:
        return "not timed" if v.checked else "not checked"
    dropped = f" (dropped after rung {v.rung_index + 1})" if v.rung_index < len(rungs) - 1 else ""
    return v.compared.verdict + dropped


def _ratio(c: Compared | None) -> str:
    if c is None:
        return "-"
    r = c.ratio
    return f"{r.ratio:.3f} ({r.ci_low:.3f}-{r.ci_high:.3f})"


def ratio_text(c: Compared | None) -> str:
    """A point's objective ratio vs the starting row with its interval ('-' when not compared)."""
    return _ratio(c)


def verdict_text(v: View, plan: dict) -> str:
    """A point's verdict as the table says it."""
    return _verdict(v, plan.get("rungs", []))


def table_md(plan: dict, vs: list[View], preds: dict[str, dict[str, dict]] | None = None) -> str:
    """The points' table; with `preds` (patchkit.sweep.occupancy.predictions) a predicted column per target GPU."""
    import numpy as np

    cases = _cases(vs)
    preds = preds or {}
    targets = (plan["spec"].get("predict") or {}).get("targets", []) if preds else []
    dropped = predicted.filtered(plan, preds)
    head = ["point", "valid", *[f"c{i + 1} (us)" for i in range(len(cases))], "vs start (95 % interval)", "verdict"]
    head += [f"predicted {t} (sm_{predicted.target_arch(t, plan['archs'])})" for t in targets]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in vs:
        valid = "no: " + v.invalid.replace("|", "\\|") if v.invalid else ("yes" if v.checked else "not checked")
        times = []
        for c in cases:
            xs = v.timing.samples.get(c) if v.timing is not None else None
            times.append(f"{float(np.median(xs)):.1f}" if xs else "-")
        name = f"{v.name} (start)" if v.reference else v.name
        verdict = _verdict(v, plan.get("rungs", []))
        if v.name in dropped and v.compared is None and not v.invalid:
            verdict += f" (filtered: {dropped[v.name]})"
        cells = [predicted.cell(preds.get(v.name, {}).get(t)) for t in targets]
        lines.append("| " + " | ".join([name, valid, *times, _ratio(v.compared), verdict, *cells]) + " |")
    legend = [f"- c{i + 1}: `{c}`" for i, c in enumerate(cases)]
    spec = plan["spec"]
    where = f"{spec['file']}:{plan['row']['line']}"
    title = (
        f"# Sweep {plan['name']}\n\nThe row {plan['row']['key']} of `{spec['function']}` ({where}), "
        f"from variant {plan['start']['variant']}; compile-checked for {', '.join('sm_' + a for a in plan['archs'])}; "
        f"ratios are the {spec['objective']} of the cases' times, point / start.\n"
    )
    cases_md = "\nCases:\n\n" + "\n".join(legend) + "\n" if legend else ""
    return title + "\n" + "\n".join(lines) + "\n" + (predicted.note(plan) if preds else "") + cases_md


def heatmap_axes(plan: dict) -> tuple[str, ...]:
    """The spec's two heatmap parameters, else the first two swept with more than one value."""
    if plan["spec"].get("heatmap"):
        return tuple(plan["spec"]["heatmap"])
    multi = [k for k, vs in plan["params"] if len(vs) > 1]
    return tuple(multi[:2])


def _cell_text(ratio: float | None, valid: int, invalid: int, timed: bool) -> str:
    head = f"{ratio:.3f}" if timed and ratio is not None else (f"{valid} valid" if valid else "")
    tail = f"{invalid} invalid" if invalid else ""
    return "\n".join(t for t in (head, tail) if t)


def heatmap_png(plan: dict, vs: list[View]) -> bytes | None:
    """Per (x, y) cell: the best objective ratio over the other parameters (without timings: the
    share of valid points), with the count of invalid points. None when nothing is swept."""
    import numpy as np

    axes = heatmap_axes(plan)
    if not axes:
        return None
    x, y = axes[0], (axes[1] if len(axes) > 1 else None)
    params = dict(plan["params"])
    xs, ys = list(params[x]), (list(params[y]) if y else [None])
    timed = any(v.compared is not None for v in vs)
    cells: dict[tuple[int, int], list[View]] = {}
    for v in vs:
        if v.values.get(x) in xs and (y is None or v.values.get(y) in ys):
            cells.setdefault((ys.index(v.values.get(y)) if y else 0, xs.index(v.values[x])), []).append(v)
    grid = np.full((len(ys), len(xs)), np.nan)
    text = [["" for _ in xs] for _ in ys]
    for (i, j), members in cells.items():
        bad = sum(1 for v in members if v.invalid)
        good = [v for v in members if not v.invalid and v.checked]
        ratios = [v.compared.ratio.ratio if v.compared else 1.0 for v in good if v.compared or v.reference]
        best = min(ratios) if ratios else None
        if timed and best is not None:
            grid[i, j] = best
        elif not timed and members:
            grid[i, j] = len(good) / len(members)
        text[i][j] = _cell_text(best, len(good), bad, timed)
    return _draw(grid, text, xs, ys, x, y, timed)


def _draw(grid, text, xs, ys, x, y, timed: bool) -> bytes:
    import matplotlib
    import matplotlib.style
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with (
        matplotlib.style.context("default"),
        matplotlib.rc_context({"svg.hashsalt": "patchkit", "path.simplify": True}),
    ):
        fig = Figure(figsize=(1.6 + 1.1 * len(xs), 1.4 + 0.7 * len(ys)), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        finite = grid[np.isfinite(grid)]
        span = max(0.02, float(np.max(np.abs(finite - 1.0)))) if finite.size else 0.05
        cmap = matplotlib.colormaps["RdYlGn_r" if timed else "RdYlGn"].with_extremes(bad="#dddddd")
        im = ax.imshow(
            np.ma.masked_invalid(grid),
            cmap=cmap,
            vmin=1 - span if timed else 0.0,
            vmax=1 + span if timed else 1.0,
            aspect="auto",
        )
        for i in range(len(ys)):
            for j in range(len(xs)):
                ax.text(j, i, text[i][j], ha="center", va="center", fontsize="small")
        ax.set_xticks(range(len(xs)), [format_value(v) for v in xs])
        ax.set_yticks(range(len(ys)), [format_value(v) if v is not None else "" for v in ys])
        ax.set_xlabel(x)
        if y:
            ax.set_ylabel(y)
        title = "time vs the starting row (lower is faster)" if timed else "compile check (green: valid, red: invalid)"
        ax.set_title(title, fontsize="medium")
        if timed:
            fig.colorbar(im, ax=ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _why_counts(invalid: list[View]) -> str:
    parts = [f"{v.name}: {v.invalid}" for v in invalid[:5]]
    more = f"; and {len(invalid) - 5} more" if len(invalid) > 5 else ""
    return "; ".join(parts) + more


def section_items(
    plan: dict, vs: list[View], top: View | None, conf: dict | None = None, preds: dict | None = None
) -> tuple[str, list[str]]:
    """The "Parameter sweep" section as its opening sentence and its items (the report's too)."""
    spec = plan["spec"]
    tried = [v for v in vs if not v.reference]
    invalid = [v for v in tried if v.invalid]
    swept = ", ".join(plan["named"])
    archs = ", ".join("sm_" + a for a in plan["archs"])
    intro = (
        f"`patchkit sweep` over {swept} of the row `{plan['row']['text']}` in `{spec['function']}` "
        f"({spec['file']}), starting from variant {plan['start']['variant']}."
    )
    items = [
        f"Tried {len(tried)} points besides the starting row; invalid {len(invalid)}"
        + (f" ({_why_counts(invalid)})" if invalid else "")
        + f"; compile-checked for {archs}."
    ]
    ref = next((v for v in vs if v.reference), None)
    if ref is not None and ref.invalid:
        items.append(f"The starting row itself does not compile: {ref.invalid}.")
    if not plan.get("rungs"):
        items.append("Not timed (compile checks only).")
    elif top is None:
        items.append("No valid point was timed against the starting row.")
    else:
        c = top.compared
        assert c is not None
        r = c.ratio
        items.append(
            f"Best: {top.name}, {r.ratio:.3f}x the starting row's time ({spec['objective']} over the cases, "
            f"95 % interval {r.ci_low:.3f}-{r.ci_high:.3f}, A/A floor {100 * c.floor:.1f} %): {c.verdict}."
        )
        if c.verdict != "faster":
            items.append("No point is faster than the starting row beyond the noise: the row is left as it is.")
    if conf is not None and top is not None and conf.get("point") == top.name:
        items.append(confirm_line(conf))
    if preds:
        items.append(_predicted_item(plan, vs, top, preds))
    return intro, items


def _predicted_item(plan: dict, vs: list[View], top: View | None, preds: dict[str, dict[str, dict]]) -> str:
    """One sentence: the starting row's and the best point's predicted blocks per SM per target GPU, and
    what the filter left out."""
    ref = next((v for v in vs if v.reference), None)
    parts = []
    for t in plan["spec"]["predict"]["targets"]:
        one = f"{t}: start {predicted.cell(preds.get(ref.name if ref else '', {}).get(t))}"
        if top is not None:
            one += f", best {predicted.cell(preds.get(top.name, {}).get(t))}"
        parts.append(one)
    dropped = predicted.filtered(plan, preds)
    tail = f"; {len(dropped)} points not timed for it (below the starting row's on the first target)" if dropped else ""
    return (
        "Predicted blocks per SM (limiter), occupancy (ptxas registers, not measured): " + "; ".join(parts) + tail + "."
    )


def section_md(plan: dict, vs: list[View], top: View | None, conf: dict | None = None, preds=None) -> str:
    """The report's "Parameter sweep" section, as out/section.md."""
    intro, items = section_items(plan, vs, top, conf, preds)
    return "\n".join(["### Parameter sweep", "", intro, "", *(f"- {x}" for x in items)]) + "\n"


def load(store: Store) -> tuple[dict, list[View], View | None, dict | None]:
    """The stored plan, every point's view, the best point and its confirmation (None if none)."""
    plan = store.load_plan()
    vs = views(plan, store.load_records(plan))
    top = best(vs, plan.get("rungs", []))
    f = store.root / "confirm.json"
    conf = read_json(f) if f.is_file() else None
    ok = isinstance(conf, dict) and top is not None and conf.get("point") == top.name
    return plan, vs, top, conf if ok else None  # type: ignore[return-value]


def floor_md(cases_info: dict, vs: list[View], top: View | None) -> str:
    """Per case: the time one run would take at the device's peak DRAM bandwidth, moving the bytes
    the op must move at least once (patchkit.measure.stats.op_bytes), and how far the starting row and the
    best point are from it."""
    import numpy as np

    peak, op = cases_info.get("peak_bw_gbs"), cases_info.get("op", "")
    ref = next((v for v in vs if v.reference and v.timing is not None), None)
    if not peak or ref is None or ref.timing is None:
        return ""
    head = "| case | bytes per run | floor (us) | start (us) | start / floor | best (us) | best / floor |"
    rows = [head, "|" + "---|" * 7]
    for i, c in enumerate(_cases(vs)):
        nbytes = stats.op_bytes(op, c)
        if not nbytes or not ref.timing.samples.get(c):
            continue
        floor_us = nbytes / (peak * 1e9) * 1e6
        r = float(np.median(ref.timing.samples[c]))
        b = top.timing.samples.get(c) if top is not None and top.timing is not None else None
        bm = f"{float(np.median(b)):.1f} | {float(np.median(b)) / floor_us:.2f}" if b else "- | -"
        rows.append(f"| c{i + 1} | {nbytes:,.0f} | {floor_us:.1f} | {r:.1f} | {r / floor_us:.2f} | {bm} |")
    if len(rows) == 2:
        return ""
    return (
        f"\n## Distance to the bandwidth floor\n\nPeak DRAM bandwidth {peak:.0f} GB/s (the device's memory clock "
        "and bus width); bytes per run: K and V at their type, Q, the mask and the output, each once "
        "(patchkit.stats.op_bytes). Medians of the deepest rung each point reached.\n\n" + "\n".join(rows) + "\n"
    )


def _cmp(c: dict | None) -> str:
    if not c:
        return "not compared"
    r = c["ratio"]
    return f"{r['ratio']:.3f} ({r['ci_low']:.3f}-{r['ci_high']:.3f}), {c['verdict']}"


def confirm_line(conf: dict) -> str:
    """The winner's confirmation in one sentence."""
    b, t = conf["build"], conf["full_suite"]
    return (
        f"Confirmed without the sweep's shortcut: a full build ({b['compiled']} objects compiled), the full "
        f"suite {'ok' if t['ok'] else 'FAILED'} ({t.get('n_ok', 0)} cases ok, {t.get('n_fail', 0)} failing) and "
        f"a fresh {conf['rounds']}-round interleaved timing: full build vs start {_cmp(conf.get('full_vs_start'))}; "
        f"the sweep's binary vs the full build {_cmp(conf.get('sweep_binary_vs_full'))}."
    )


def confirm_md(conf: dict) -> str:
    """The winner's confirmation: full build, full suite, fresh timing (patchkit.sweep.gpu)."""
    cmp = _cmp
    b, t = conf["build"], conf["full_suite"]
    floor = (conf.get("full_vs_start") or {}).get("floor")
    return (
        f"\n## Confirmation of {conf['point']}\n\n"
        f"- Full build of commit {conf['commit'][:12]} in the start variant's build folder: {b['compiled']} objects "
        f"compiled, {b['seconds']:.0f} s ({b['log']}).\n"
        f"- Full suite (`-o` the op, no `-p`): {'ok' if t['ok'] else 'FAILED: ' + t['reason']}, "
        f"{t.get('n_ok', 0)} cases ok, {t.get('n_fail', 0)} failing ({t.get('log', '')}).\n"
        f"- Fresh interleaved timing, {conf['rounds']} rounds"
        + (f", A/A floor {100 * floor:.1f} %" if floor is not None else "")
        + f": full build vs start {cmp(conf.get('full_vs_start'))}; the sweep's binary vs start "
        f"{cmp(conf.get('sweep_binary_vs_start'))}; the sweep's binary vs the full build "
        f"{cmp(conf.get('sweep_binary_vs_full'))}.\n"
    )


def write_outputs(store: Store) -> dict[str, str]:
    """out/sweep.md, heatmap.png, best.patch (when a point is faster) and section.md, from the store."""
    plan, vs, top, conf = load(store)
    preds = predicted.predictions(store.root, plan, store.load_records(plan))
    store.out.mkdir(parents=True, exist_ok=True)
    files = {"table": store.out / "sweep.md", "section": store.out / "section.md"}
    extra = ""
    cases_file = store.root / "cases.json"
    if cases_file.is_file():
        extra += floor_md(read_json(cases_file), vs, top)  # type: ignore[arg-type]
    if conf is not None:
        extra += confirm_md(conf)
    write_atomic(files["table"], table_md(plan, vs, preds) + extra)
    write_atomic(files["section"], section_md(plan, vs, top, conf, preds))
    png = heatmap_png(plan, vs)
    heat = store.out / "heatmap.png"
    if png is not None:
        write_atomic(heat, png)
        files["heatmap"] = heat
    else:
        heat.unlink(missing_ok=True)
    best_patch = store.out / "best.patch"
    if top is not None and top.compared is not None and top.compared.verdict == "faster":
        write_atomic(best_patch, store.patch_file(top.name).read_bytes())
        files["best"] = best_patch
    else:
        best_patch.unlink(missing_ok=True)
    return {k: str(v) for k, v in files.items()}
