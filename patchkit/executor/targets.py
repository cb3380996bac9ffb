"""Every target's comparison through the chosen executor, and one merged report over all of them.

    run id R (--run, or the time and label)
    runs/<recipe>/R-<target>/   one run folder per target (results.json `target`), wherever it ran
    runs/<recipe>/R/report.md   the merged report (report_main over every target's folder), decode.png,
                                targets.json (each target: resource, node, outcome, folder)

The local executor keeps today's layout: one run folder R with its report.md.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from patchkit import report
from patchkit.errors import OptionError, ReportError
from patchkit.executor import gather
from patchkit.executor.jobs import ExecutorOptions, Job, Outcome, Target
from patchkit.options import Context, RunOptions
from patchkit.results import new_run_id
from patchkit.workspace import is_safe_component, write_json

INSTALL = "pip install 'patchkit[ray]'"


def load(kind: str) -> ModuleType:
    """The executor module (`run_jobs(ctx, jobs, options) -> list[Outcome]`): Ray is imported only here,
    and only for `ray`."""
    if kind == "ray":
        # read when Ray is imported: show every node's lines, not one of each with "[repeated 2x across cluster]"
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        return importlib.import_module(f"patchkit.executor.{kind}")
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] != "ray":
            raise
        raise OptionError(f"--executor {kind}: Ray is not installed here ({INSTALL})") from None


def run_id_of(opts: RunOptions, exe: ExecutorOptions, label: str) -> str:
    """The run id R of a multi-target run: --run (an id, not a path), else the time and label."""
    if opts.run and not is_safe_component(opts.run):
        raise OptionError(f"--run {opts.run!r}: with --executor {exe.kind} give a run id (each target is <id>-<name>)")
    return opts.run or new_run_id(label)


def jobs_of(opts: RunOptions, exe: ExecutorOptions, run_id: str, *, label: str, not_run_ok: bool) -> list[Job]:
    """One job per target, run id <run_id>-<target>; the local executor's one job keeps --run as given."""
    if exe.kind == "local":
        return [Job(target=Target(name=""), opts=opts, label=label, not_run_ok=not_run_ok)]
    return [
        Job(target=t, opts=replace(opts, run=f"{run_id}-{t.name}"), label=label, not_run_ok=not_run_ok)
        for t in exe.targets
    ]


def run_targets(ctx: Context, opts: RunOptions, exe: ExecutorOptions, *, label: str, not_run_ok: bool) -> int:
    """Run every target's comparison, render one report over all of them; the exit status is the worst
    target's (0 all ok, 1 a step not ok or a target lost, 2 a run stopped on an error)."""
    run_id = "" if exe.kind == "local" else run_id_of(opts, exe, label)
    jobs = jobs_of(opts, exe, run_id, label=label, not_run_ok=not_run_ok)
    outcomes = load(exe.kind).run_jobs(ctx, jobs, exe)
    folders = _folders(ctx, outcomes)
    if exe.kind == "local":
        out = folders[0] / "report.md"
    else:
        out = ctx.ws.runs(ctx.recipe.name) / run_id / "report.md"
        _record(out.parent / "targets.json", outcomes)
        for o in outcomes:
            where = o.job.target.resource or "any node"
            print(f"target {o.job.target.name} ({where}): {o.summary} - {o.folder}")
    status = max(o.status for o in outcomes)
    try:
        report.report_main(folders, "md", out)
    except ReportError as e:
        print(f"no merged report: {e}")
        print("the run folders are kept: patchkit report --force " + " ".join(str(f) for f in folders))
        return 2
    print(f"report: {out}")
    return status


def _folders(ctx: Context, outcomes: list[Outcome]) -> list[Path]:
    """Each outcome's run folder here; one for a target that brought none back (not run, and why)."""
    runs = ctx.ws.runs(ctx.recipe.name)
    real = [o.folder for o in outcomes if o.folder is not None and not o.lost]
    real += [runs / o.job.run_id for o in outcomes if o.lost and (runs / o.job.run_id / "env.json").is_file()]
    for o in outcomes:
        if o.lost or o.error:
            reason = o.lost or f"the run stopped: {o.error}"
            like = next((f for f in real if f.name != o.job.run_id), None)
            o.folder = gather.not_run(ctx, o.job, reason, like=like)
    return [o.folder for o in outcomes if o.folder is not None]


def _record(path: Path, outcomes: list[Outcome]) -> None:
    write_json(
        path,
        {
            "targets": [
                {
                    "name": o.job.target.name,
                    "resource": o.job.target.resource,
                    "run_id": o.job.run_id,
                    "folder": str(o.folder) if o.folder else None,
                    "status": o.status,
                    "outcome": o.summary,
                    **o.where,
                }
                for o in outcomes
            ]
        },
    )
