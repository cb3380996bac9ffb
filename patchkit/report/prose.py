"""The author's prose and the patch list: recipe_info (recorded in results.json) of the newest run, verbatim.
Markdown: the "Additional information" patch lists."""

from __future__ import annotations

from patchkit.report.evidence import Evidence, Patch, Prose
from patchkit.report.fmt import DASH, code
from patchkit.report.merge import patch_shas
from patchkit.report.runview import RunView


def prose_run(runs: list[RunView]) -> RunView:
    """The run whose recipe_info (author prose) is used: the newest one (by created, then run id)."""
    return max(runs, key=lambda r: (str(r.data.get("created") or ""), r.run_id))


def patches_of(runs: list[RunView]) -> list[Patch]:
    run = prose_run(runs)
    info = run.data.get("recipe_info") or {}
    env_shas = patch_shas(run)
    out = []
    for p in info.get("patches") or []:
        f = str(p.get("file") or "")
        out.append(
            Patch(
                id=str(p.get("id") or ""),
                file=f,
                subject=str(p.get("subject") or ""),
                upstream_pr=str(p.get("upstream_pr") or ""),
                depends_on=[str(x) for x in p.get("depends_on") or []],
                local=bool(p.get("local")),
                sha256=str(p.get("sha256") or env_shas.get(f) or ""),
            )
        )
    return out


def prose(runs: list[RunView], patches: list[Patch]) -> Prose:
    """Title (recipe_info.title, else the top PR patch's subject), overview, AI disclosure, notes."""
    run = prose_run(runs)
    info = run.data.get("recipe_info") or {}
    title = str(info.get("title") or "")
    pr = [p for p in patches if not p.local]
    if not title and pr:
        title = pr[-1].subject  # the top of the series
    return Prose(
        title=title,
        overview=str(info.get("overview") or ""),
        ai_disclosure=str(info.get("ai_disclosure") or ""),
        notes=[str(n) for n in info.get("notes") or []],
        from_run=run.run_id,
    )


def _item(p: Patch) -> str:
    s = f"{code(p.id)} {p.subject or DASH} ({code(p.file)})"
    s += "; depends on: " + (", ".join(code(d) for d in p.depends_on) if p.depends_on else "none")
    if not p.local:
        s += "; upstream PR: " + (p.upstream_pr or DASH)
    return s


def additional(ev: Evidence) -> dict[str, list[str]]:
    """The PR patches and the local test-only patches, one line each."""
    return {
        "pr": [_item(p) for p in ev.patches if not p.local],
        "local": [_item(p) for p in ev.patches if p.local],
    }
