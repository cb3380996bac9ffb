"""The report: a PR description in llama.cpp's template, a JSON evidence document and a decode plot,
rendered from stored results bundles only (results.json, env.json; raw logs are only checked to exist).

    bundles -> RunView per bundle (runview; labelled by GPU) -> merge check (merge; fingerprints)
            -> Evidence (evidence: typed, one dataclass per section; its JSON is `--format json`),
               collected by collect.evidence from every section
            -> markdown (render; each section's blocks laid out by templates/pr.md.j2),
               JSON (Evidence.to_json) and decode.png (plot)

The markdown is read in one screen: the author's prose (prose: soft wraps undone, words as written,
related upstream PRs and issues as links), then a summary (summary: per PR patch, what it changes, how
many kernel cases and llama-bench tests are faster / slower / unchanged with the range of their ratios,
its tests and numerics; compile checks as counts; variants that compile to base's code, not measured),
then what was not tested, then each section's evidence collapsed in a <details> block that names its raw
logs. A table's interval method, noise floor and verdict rule are said once, in a caption, from the data
(intervals: the older bootstrap intervals, plainly not meaningful at n=3, or the distribution-free ones
with their exact coverage). Everything patchkit writes is ASCII (fmt.ascii_blocks, as llama.cpp's
AGENTS.md asks); non-ASCII characters in the author's text are kept and named in the footer.

Modules: one per step kind (build, check, test, kernel, path, occupancy, decode, numerics), each holding
that kind's evidence extraction, its markdown section, its "Not tested" lines and its `SECTION`
(patchkit.report.part.Section), found by the kind's name in the registry (patchkit.registry.KINDS) and
paired with the kind's runner by patchkit.run.steps.STEPS (the report does not import the run stage);
the other sections (hardware, prose: the author's text and the patch lists, summary, attribution,
not_tested: the lines about the runs as a whole); intervals (the captions of intervals and verdicts); fmt
(number formats, cells, blocks, ASCII).

SECTIONS (patchkit.report.sections) maps a step kind to its Section, in report order: build, then the
registry's kinds. collect stores each section's evidence as Evidence.<slot> (build and check share "builds":
collect joins their per-run lists into Evidence.builds); render lays out each slot's blocks under its heading
in that order (templates/pr.md.j2 loops over the slots).

Deterministic: the same bundles give the same bytes (no clock, sorted keys, fixed number formats; the
ratios computed between two patched variants use patchkit.measure.stats, which draws no random numbers).
patchkit writes no prose: the author's text comes from the recipe (recorded in results.json as
recipe_info); everything else is a heading, a fixed label, or a sentence generated from the data.
"""

from __future__ import annotations

from patchkit.report.collect import evidence, pr_title
from patchkit.report.evidence import REPORT_SCHEMA, Evidence
from patchkit.report.part import Section
from patchkit.report.render import PLOT_FILE, decode_png, render, render_markdown, report_main
from patchkit.report.runview import RunView, open_runs
from patchkit.report.sections import SECTIONS

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
