"""`bench:decode`: llama-bench decode t/s per variant, depth and cache type, speedups against base."""

from __future__ import annotations

from typing import Any

from patchkit.report.evidence import Decode, DecodeData, DecodeRatio, DecodeRow, DecodeRun, Evidence
from patchkit.report.fmt import (
    DASH,
    Block,
    bench_test_name,
    code,
    gpu_col,
    interval,
    logs_line,
    not_run,
    num,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.runview import RunView, need

STEP = "bench:decode"
ROW_KEYS = (
    "variant",
    "depth",
    "type_k",
    "type_v",
    "n_gen",
    "samples_ts",
    "avg_ts",
    "stddev_ts",
    "median",
    "ci_low",
    "ci_high",
)
RATIO_KEYS = ("variant", "depth", "ratio", "ci_low", "ci_high", "verdict", "type_k", "type_v", "n_gen")


def _row(run: RunView, x: dict[str, Any]) -> DecodeRow:
    return DecodeRow(
        **{k: x.get(k) for k in ROW_KEYS},
        log=run.log(x.get("log")),
        logs=run.logs(x.get("logs") or ([x["log"]] if x.get("log") else [])),
    )


def _rows(run: RunView, d: dict[str, Any], order: list[str]) -> list[DecodeRow]:
    """The rows by n_gen, cache type, depth, then variant order."""
    where = f"{run.where}: {STEP}"
    rows = []
    for i, x in enumerate(d["rows"]):
        for k in ("variant", "depth", "median", "ci_low", "ci_high", "samples_ts"):
            need(x, k, f"{where} row {i}")
        rows.append(_row(run, x))
    rank = {v: i for i, v in enumerate(order)}
    rows.sort(
        key=lambda x: (
            x.n_gen or 0,
            str(x.type_k),
            str(x.type_v),
            x.depth,
            rank.get(x.variant, len(rank)),
            str(x.variant),
        )
    )
    return rows


def _run(run: RunView, order: list[str]) -> DecodeRun:
    s = run.step(STEP)
    e = DecodeRun.of(run, STEP, s)
    if s is not None and s.data.get("rows") is not None:
        d = s.data
        e.measured = DecodeData(
            model=d.get("model") or {},
            model_path=d.get("model_path"),
            args=[str(a) for a in d.get("args") or []],
            rounds=d.get("rounds"),
            rows=_rows(run, d, order),
            vs_base=[DecodeRatio(**{k: v.get(k) for k in RATIO_KEYS}) for v in d.get("vs_base") or []],
        )
    return e


def evidence(runs: list[RunView], order: list[str]) -> Decode:
    return Decode(runs=[_run(r, order) for r in runs])


def _model_line(m: DecodeData) -> str:
    parts = [
        f"{k} {str(v)[:12] if k == 'sha256' else v}"
        for k, v in sorted(m.model.items())
        if k != "path" and v not in (None, "", [], {}) and not isinstance(v, (dict, list))
    ]
    s = ", ".join(parts) if parts else "not described"
    if m.model_path:
        s += f" ({code(m.model_path)})"
    return s


def _vs(m: DecodeData, row: DecodeRow, variant: str) -> DecodeRatio | None:
    for v in m.vs_base:
        if (
            v.variant == variant
            and v.depth == row.depth
            and all(getattr(v, k) in (None, getattr(row, k)) for k in ("type_k", "type_v", "n_gen"))
        ):
            return v
    return None


def _cells(m: DecodeData, by: dict[str, DecodeRow], variants: list[str], others: list[str]) -> list[str]:
    """One table row's t/s and speedup cells (by: the variants' rows of one test and cache type)."""
    any_row = next(iter(by.values()))
    cells = []
    for v in variants:
        x = by.get(v)
        cells.append(
            f"{num(x.median, 'ts')} {interval(x.ci_low, x.ci_high, 'ts')} n={len(x.samples_ts)}" if x else DASH
        )
    for v in others:
        r = _vs(m, any_row, v) if v in by else None
        cells.append(f"{num(r.ratio, 'ratio')} {interval(r.ci_low, r.ci_high, 'ratio')} {r.verdict}" if r else DASH)
    return cells


def _notes(e: DecodeRun, m: DecodeData, pre: str) -> list[str]:
    notes = [pre + "Model: " + _model_line(m) + "."]
    if m.args:
        notes.append(
            pre
            + "llama-bench arguments: "
            + code(" ".join(m.args))
            + (f"; {m.rounds} interleaved round(s)" if m.rounds else "")
            + "."
        )
    if e.status in ("fail", "error"):
        notes.append(pre + "step result: " + state_label(e.status, e.reason))
    return notes


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    runs = ev.decode.runs
    have = [(e, e.measured) for e in runs if e.measured is not None]
    out = not_run([e for e in runs if e.measured is None], multi)
    if not have:
        return out
    variants = [v for v in ev.variants if any(x.variant == v for _, m in have for x in m.rows)]
    variants += sorted({x.variant for _, m in have for x in m.rows} - set(variants))
    base = "base" if "base" in variants else variants[0]
    others = [v for v in variants if v != base]
    rows, logs, notes = [], [], []
    for e, m in have:
        logs += e.logs
        keys: dict[tuple, dict[str, DecodeRow]] = {}
        for x in m.rows:
            keys.setdefault((x.n_gen or 0, str(x.type_k), str(x.type_v), x.depth), {})[x.variant] = x
        for (_, tk, tv, _), by in keys.items():
            any_row = next(iter(by.values()))
            name = bench_test_name(any_row.n_gen, any_row.depth)
            rows.append([*gpu_col(multi, e.gpu), name, f"{tk}/{tv}", *_cells(m, by, variants, others)])
        notes += _notes(e, m, prefix(multi, e.gpu))
    header = [
        *gpu_col(multi, "GPU"),
        "test",
        "K/V cache",
        *[f"t/s {v}" for v in variants],
        *[f"speedup {v}" for v in others],
    ]
    out += [table(header, rows), logs_line(logs)]
    out.append(
        text(
            "t/s: median of the samples [95 % interval], n = samples; "
            f"speedup = t/s(variant) / t/s({base}), > 1 is faster, with its 95 % interval."
        )
    )
    out += [text(n) for n in notes]
    if ev.plot:
        out.append(text(f"![decode t/s by depth]({ev.plot})"))
    return out
