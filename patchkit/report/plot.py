"""The decode plots: t/s against depth, one line per variant (and per GPU when runs are merged), error
bars from the stored 95 % interval; and for the llama-bench matrix the pp speedup against the micro-batch
size, one line per variant and depth. Matplotlib's object API with the Agg canvas (no pyplot, no global
state), the default style, and no 'Software' metadata, so the same data give the same PNG bytes."""

from __future__ import annotations

import io
from typing import Any

from patchkit.report.evidence import DecodeRow, Evidence


def _config(x: DecodeRow) -> tuple:
    """What a line of the plot holds fixed: the test without its depth, and the rest of its identity."""
    return (x.test.split(" @ ")[0], str(x.type_k), str(x.type_v), str(x.n_ubatch), str(x.model_type))


def decode_series(ev: Evidence) -> list[dict[str, Any]]:
    """Series from the report evidence: label, depths, medians, interval bounds (sorted by depth); one per
    variant and test (pp and tg apart), and per GPU when runs are merged."""
    measured = [(e, e.measured) for e in ev.decode.runs if e.measured and e.measured.rows]
    configs = {_config(x) for _, m in measured for x in m.rows}
    rank = {v: i for i, v in enumerate(ev.variants)}
    out = []
    for e, m in measured:
        groups: dict[tuple, list[DecodeRow]] = {}
        for x in m.rows:
            groups.setdefault((x.variant, *_config(x)), []).append(x)
        for (v, *cfg), xs in sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], len(rank)), str(kv[0]))):
            xs = sorted(xs, key=lambda x: x.depth)
            label = v if not ev.multi else f"{e.gpu}: {v}"
            if len(configs) > 1:
                label += f" ({cfg[0]}, {cfg[1]}/{cfg[2]}" + (f", ub {cfg[3]}" if cfg[3] != "None" else "") + ")"
            out.append(
                {
                    "label": label,
                    "depth": [x.depth for x in xs],
                    "median": [x.median for x in xs],
                    "ci_low": [x.ci_low for x in xs],
                    "ci_high": [x.ci_high for x in xs],
                }
            )
    return out


def ubatch_series(ev: Evidence) -> list[dict[str, Any]]:
    """Speedup against base by micro-batch, one series per variant and depth (and GPU when merged), of the
    pp tests measured at two or more micro-batch sizes (the reviewer's matrix); empty otherwise."""
    out = []
    rank = {v: i for i, v in enumerate(ev.variants)}
    for e in ev.decode.runs:
        m = e.measured
        rows = [x for x in (m.rows if m else []) if x.ratio is not None and x.n_prompt and not x.n_gen and x.n_ubatch]
        if len({x.n_ubatch for x in rows}) < 2:
            continue
        groups: dict[tuple, list[DecodeRow]] = {}
        for x in rows:
            groups.setdefault((x.variant, x.depth, x.test.split(" @ ")[0]), []).append(x)
        for (v, depth, test), xs in sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], len(rank)), kv[0][1])):
            xs = sorted(xs, key=lambda x: int(x.n_ubatch))
            label = (f"{e.gpu}: " if ev.multi else "") + f"{v}, {test} at depth {depth}"
            out.append(
                {
                    "label": label,
                    "ubatch": [int(x.n_ubatch) for x in xs],
                    "median": [float(x.ratio.ratio) for x in xs],  # type: ignore[union-attr]
                    "ci_low": [float(x.ratio.ci_low) for x in xs],  # type: ignore[union-attr]
                    "ci_high": [float(x.ratio.ci_high) for x in xs],  # type: ignore[union-attr]
                }
            )
    return out


def _errorbar_png(
    series: list[dict[str, Any]], x: str, *, xlabel: str, ylabel: str, title: str, speedup: bool
) -> bytes:
    """One PNG of median-with-interval lines, one per series, against `x` (deterministic bytes).
    `speedup`: a ratio plot (a line at 1, a log2 x axis); else t/s from 0."""
    import matplotlib
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with (
        matplotlib.style.context("default"),
        matplotlib.rc_context({"svg.hashsalt": "patchkit", "path.simplify": True}),
    ):
        fig = Figure(figsize=(7.0, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for s in series:
            lo = [max(m - a, 0.0) for m, a in zip(s["median"], s["ci_low"])]
            hi = [max(b - m, 0.0) for m, b in zip(s["median"], s["ci_high"])]
            ax.errorbar(s[x], s["median"], yerr=[lo, hi], marker="o", capsize=3, label=s["label"])
        if speedup:
            ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if not speedup:
            ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def speedup_png(series: list[dict[str, Any]], *, title: str = "Prompt processing speedup by micro-batch") -> bytes:
    """Speedup (variant / base t/s, its interval as error bars) against the micro-batch size, log2 axis."""
    return _errorbar_png(
        series,
        "ubatch",
        xlabel="micro-batch size (llama-bench -ub)",
        ylabel="speedup vs base (t/s ratio, interval)",
        title=title,
        speedup=True,
    )


def decode_png(series: list[dict[str, Any]], *, title: str = "Decode throughput by depth") -> bytes:
    """Decode t/s (median, interval) against the depth, one line per variant and configuration."""
    return _errorbar_png(
        series,
        "depth",
        xlabel="depth (tokens in the KV cache)",
        ylabel="decode t/s (median, 95 % interval)",
        title=title,
        speedup=False,
    )
