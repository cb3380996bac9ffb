"""The report's "Parameter sweep" section: `patchkit report RUN --sweep FOLDER`, made from the sweep
folder's stored results (patchkit.sweep.output), never from its rendered files. The sweep package owns
it (the report, a core stage, never imports patchkit.sweep): the command line hands the blocks to
patchkit.report.render."""

from __future__ import annotations

from pathlib import Path

from patchkit.errors import ReportError
from patchkit.report.fmt import Block, bullets, details, table, text
from patchkit.sweep import occupancy as predicted
from patchkit.sweep import output
from patchkit.sweep.store import Store


def check(folders: list[Path]) -> None:
    """Each folder is a sweep folder (before anything is written)."""
    for folder in folders:
        if not Store(Path(folder)).plan_file.is_file():
            raise ReportError(f"--sweep {folder}: no sweep.json (not a patchkit sweep folder)")


def markdown(folders: list[Path]) -> list[Block]:
    check(folders)
    out: list[Block] = []
    for folder in folders:
        store = Store(Path(folder))
        plan, vs, top, conf = output.load(store)
        preds = predicted.predictions(store.root, plan, store.load_records(plan))
        intro, items = output.section_items(plan, vs, top, conf, preds)
        rows = [
            [
                v.name,
                "no: " + v.invalid if v.invalid else "yes",
                output.ratio_text(v.compared),
                output.verdict_text(v, plan),
            ]
            for v in vs
        ]
        out += [text(intro), bullets(items)]
        out.append(
            details(
                f"{len(vs)} points of sweep {plan['name']}", [table(["point", "valid", "vs start", "verdict"], rows)]
            )
        )
    return out
