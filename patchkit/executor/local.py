"""The local executor: every job in this process, one after the other (today's pipeline; no Ray)."""

from __future__ import annotations

from patchkit.executor.jobs import ExecutorOptions, Job, Outcome
from patchkit.options import Context
from patchkit.results import Bundle
from patchkit.run import pipeline


def run_job(ctx: Context, job: Job) -> tuple[Bundle, int]:
    """The job's comparison (pipeline.run), its target recorded in results.json (`target`), and its exit
    status: every build and selected step ok, or (with `not_run_ok`) not run because it cannot run here.
    The bundle stays locked for this process: close it when done."""

    def tag(bundle: Bundle) -> None:
        if job.target.name:
            bundle.set_meta(target=job.target.name)

    return pipeline.run_with_status(ctx, job.opts, label=job.label, not_run_ok=job.not_run_ok, then=tag)


def run_jobs(ctx: Context, jobs: list[Job], options: ExecutorOptions) -> list[Outcome]:
    """Each job here in turn. A patchkit error stops the command as it does without an executor."""
    out = []
    for job in jobs:
        bundle, status = run_job(ctx, job)
        bundle.close()
        out.append(Outcome(job=job, status=status, folder=bundle.path))
    return out
