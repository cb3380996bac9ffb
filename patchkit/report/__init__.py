"""The report: a PR description in llama.cpp's template, a JSON evidence document and a decode plot,
rendered from stored results bundles only (results.json, env.json; raw logs are only checked to exist).

    bundles -> RunView per bundle (runview; labelled by GPU) -> merge check (merge; fingerprints)
            -> Evidence (evidence: typed, one dataclass per section; its JSON is `--format json`),
               collected by collect.evidence from every section
            -> markdown (render; each section's blocks laid out by templates/pr.md.j2),
               JSON (Evidence.to_json) and decode.png (plot)

Modules: one per step kind, each holding that kind's evidence extraction and its markdown section
(build, check, test, kernel, path, decode, numerics); the other sections (hardware, prose: the author's
text and the patch lists, attribution, not_tested); fmt (number formats, cells, blocks).

SECTIONS (patchkit.report.sections) maps a step kind to its Section, in report order:
"build", "check", "test", "bench:kernel", "bench:path", "bench:decode", "numerics".

    @dataclass(frozen=True)
    class Section:
        kind: str      # the key in SECTIONS
        step: str      # the step name it reads ("bench:kernel"), or its names' prefix ("build:", "test:")
        slot: str      # the Evidence field and template block list it fills ("builds" for build and check)
        evidence: Callable[[list[RunView], list[str]], Any]  # (runs in report order, variant order) -> evidence
        markdown: Callable[[Evidence, bool], list[Block]]    # (evidence, several runs merged) -> blocks

build and check give one list per run (their configs); collect joins them into Evidence.builds. The
others give their Evidence field (Tests, Kernel, KernelPath, Decode, Numerics).

Deterministic: the same bundles give the same bytes (no clock, sorted keys, fixed number formats,
fixed bootstrap seed). patchkit writes no prose: the author's text comes verbatim from the recipe
(recorded in results.json as recipe_info); everything else is a heading, a fixed label, or a
sentence generated from the data.
"""

from __future__ import annotations

from patchkit.report.collect import evidence, pr_title
from patchkit.report.evidence import REPORT_SCHEMA, Evidence
from patchkit.report.render import PLOT_FILE, decode_png, render, render_markdown, report_main
from patchkit.report.runview import RunView, open_runs
from patchkit.report.sections import SECTIONS, Section

__all__ = [
    "PLOT_FILE",
    "REPORT_SCHEMA",
    "SECTIONS",
    "Evidence",
    "RunView",
    "Section",
    "decode_png",
    "evidence",
    "open_runs",
    "pr_title",
    "render",
    "render_markdown",
    "report_main",
]
