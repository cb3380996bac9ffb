"""What runs on a node, without Ray (patchkit.executor.ray wraps these in Ray tasks).

    prepare(spec)            fetch, apply and build every variant (a CPU task); builds are keyed, so a
                             node that has them already only checks them
    measure(spec, prepared)  the whole comparison (pipeline.run: its builds are found finished), its run
                             folder packed as bytes (a gzip'd tar) for the driver

Both run in the project folder that Ray's runtime_env working_dir carried to the node (the recipe is
given relative to it) and in the work folder the driver named. Two nodes of one machine share that
work folder: `prepare` takes a waiting lock (locks/executor-prepare.lock) so that their builds queue;
a fail-fast lock of the pipeline met anyway (another run applying or checking the same trees) comes
back as `busy`, and the driver runs the task again in a fresh worker, which resumes the run folder.
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import build as build_mod
from patchkit.errors import LockError, PatchkitError
from patchkit.executor.jobs import Job
from patchkit.executor.local import run_job
from patchkit.options import Context, context
from patchkit.results import LOCK
from patchkit.run import pipeline

PREPARE_LOCK = "executor-prepare"  # <work>/locks/executor-prepare.lock: one prepare at a time per work folder


@dataclass(frozen=True, kw_only=True)
class NodeJob:
    """A job as a node gets it: the recipe relative to the project folder, the work folder, offline."""

    recipe: str
    work: str
    offline: bool
    job: Job


def node_context(spec: NodeJob) -> Context:
    return context(recipe=str(Path.cwd() / spec.recipe), work=spec.work, offline=spec.offline)


def prepare(spec: NodeJob) -> dict:
    """Fetch, apply and build every variant of the job here: {"builds": [...], "seconds": s} or {"busy": why}."""
    t0 = time.monotonic()
    ctx = node_context(spec)
    opts = spec.job.opts
    try:
        with ctx.ws.lock(ctx.ws.root / PREPARE_LOCK, wait=True):
            base = pipeline.fetch(ctx)
            states = pipeline.apply(ctx, base, only=opts.variants, leave_one_out=opts.leave_one_out, force=opts.force)
            results = build_mod.build_variants(ctx.recipe, base, ctx.ws, states, opts.build, logs=ctx.logs)
    except LockError as e:
        return {"busy": str(e)}
    except PatchkitError as e:
        return {"error": str(e)}
    return {"builds": [r.to_dict() for r in results], "seconds": round(time.monotonic() - t0, 1)}


def measure(spec: NodeJob, prepared: dict, where: dict) -> dict:
    """The job's comparison here: {"status", "folder", "tar"}, {"busy": why} (run it again) or
    {"error", "folder", "tar"} (the run stopped; its folder as far as it got, if it was made)."""
    ctx = node_context(spec)
    job = spec.job
    folder = ctx.ws.runs(ctx.recipe.name) / job.run_id
    try:
        bundle, status = run_job(ctx, job)
    except LockError as e:
        return {"busy": str(e)}
    except PatchkitError as e:
        made = (folder / "results.json").is_file()
        return {"error": str(e), "folder": folder.name, "tar": pack(folder) if made else None}
    bundle.set_meta(executor={"target": job.target.name, "resource": job.target.resource, **where, "prepare": prepared})
    bundle.close()
    return {"status": status, "folder": bundle.path.name, "tar": pack(bundle.path)}


def pack(folder: Path) -> bytes:
    """The run folder as a gzip'd tar (names relative to it; its lock and links left out)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for p in sorted(folder.rglob("*")):
            if p.is_symlink() or p.name == LOCK or not (p.is_file() or p.is_dir()):
                continue
            tf.add(p, arcname=str(p.relative_to(folder)), recursive=False)
    return buf.getvalue()
