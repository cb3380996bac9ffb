"""Rendering the evidence: markdown through templates/pr.md.j2, JSON, and decode.png (patchkit.report.plot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jinja2

import patchkit.report.attribution as attribution
import patchkit.report.hardware as hardware
import patchkit.report.not_tested as not_tested
import patchkit.report.plot as plot
import patchkit.report.summary as summary
from patchkit.errors import ReportError, ResultsError
from patchkit.report.collect import evidence
from patchkit.report.evidence import Evidence
from patchkit.report.fmt import NOT_PROVIDED, Block, ascii_blocks, ascii_text, code
from patchkit.report.prose import additional, indent_rest, non_ascii_prose, reflow
from patchkit.report.sections import sections, slots
from patchkit.results import Bundle
from patchkit.workspace import write_atomic

PLOT_FILE = "decode.png"
UBATCH_PLOT_FILE = "decode-ubatch.png"  # the matrix's speedup by micro-batch (runs with two or more -ub)
TEMPLATES = Path(__file__).resolve().parent / "templates"
FORMATS = ("md", "json")


def blocks(ev: Evidence) -> dict[str, list[Block]]:
    """Each template slot's blocks: the summary, hardware, the step sections (SECTIONS, in order),
    attribution, not tested; all of it ASCII (fmt.ascii_blocks)."""
    multi = ev.multi
    out = {"summary": summary.markdown(ev), "hardware": hardware.markdown(ev)}
    for s in sections().values():
        out.setdefault(s.slot, []).extend(s.markdown(ev, multi))
    out["attribution"] = attribution.markdown(ev, multi)
    out["not_tested"] = not_tested.markdown(ev)
    return {k: ascii_blocks(v) for k, v in out.items()}


def footer(ev: Evidence) -> list[str]:
    """Lines after the evidence: logs missing on disk, non-ASCII characters in the author's text."""
    out = []
    if ev.missing_logs:
        out.append("Logs named in results.json but missing on disk: " + ", ".join(code(m) for m in ev.missing_logs))
    if where := non_ascii_prose(ev):
        out.append(
            "Note for the author: non-ASCII characters in your text, kept as written: "
            + "; ".join(where)
            + ". llama.cpp's AGENTS.md asks for ASCII."
        )
    return [ascii_text(x) for x in out]


def render_markdown(ev: Evidence, sweep: Sequence[Block] = ()) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    p = ev.prose
    return env.get_template("pr.md.j2").render(
        title=reflow(p.title).replace("\n", " ") or NOT_PROVIDED,
        overview=reflow(p.overview) or NOT_PROVIDED,
        ai_disclosure=indent_rest(reflow(p.ai_disclosure)) or NOT_PROVIDED,
        extra=additional(ev),
        not_provided=NOT_PROVIDED,
        s={**blocks(ev), "sweep": ascii_blocks(list(sweep))},
        steps=[{"slot": k, "heading": h, "shown_empty": e} for k, h, e in slots()],
        footer=footer(ev),
        gpus=[r.gpu for r in ev.runs],
        multi=ev.multi,
    )


def decode_png(ev: Evidence) -> bytes | None:
    series = plot.decode_series(ev)
    return plot.decode_png(series) if series else None


def render(
    bundles: list[Bundle],
    fmt: str = "md",
    out_dir: Path | None = None,
    *,
    force: bool = False,
    sweep: Sequence[Block] = (),
) -> str:
    """The report as text (fmt 'md' or 'json'). With out_dir, the decode plot is written there as
    decode.png (atomically) and linked from the markdown; without, no plot is written or linked.
    `sweep`: the blocks of the "Parameter sweep" section the markdown gets (not the JSON; made by
    patchkit.sweep.section from sweep folders)."""
    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r} (md or json)")
    ev = evidence(bundles, force=force)
    if out_dir is not None:
        png = decode_png(ev)
        if png is not None:
            write_atomic(Path(out_dir) / PLOT_FILE, png)
            ev.plot = PLOT_FILE
        if series := plot.ubatch_series(ev):
            write_atomic(Path(out_dir) / UBATCH_PLOT_FILE, plot.speedup_png(series))
            ev.plot_ubatch = UBATCH_PLOT_FILE
    return ev.to_json() if fmt == "json" else render_markdown(ev, sweep)


def report_main(
    run_paths: list[Path],
    fmt: str = "md",
    out: Path | None = None,
    *,
    force: bool = False,
    sweep: Sequence[Block] = (),
) -> int:
    """`patchkit report`: open the run folders, merge, render; write `out` (and decode.png beside it)
    atomically, or print to stdout when out is None (no plot then). Returns the exit code (0)."""
    bundles = []
    for p in run_paths:
        try:
            bundles.append(Bundle.open(Path(p)))
        except ResultsError as e:
            raise ReportError(str(e)) from None
    out = Path(out) if out is not None else None
    text = render(bundles, fmt, out.parent if out is not None else None, force=force, sweep=sweep)
    if out is None:
        print(text, end="")
    else:
        write_atomic(out, text)
    return 0
