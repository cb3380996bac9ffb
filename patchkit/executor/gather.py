"""Run folders back in the driver's work folder: unpacked from a node's bytes, or recorded as not run.

A target that brought no finished run back (its node was lost, or the run stopped before its folder
was made) still gets a run folder, so that the merged report shows it: every step it was to run is
NOT_RUN with the reason ("node lost (NodeDiedError: ...)"). Where the node wrote into this very work
folder (two nodes of one machine), the steps it finished before it was lost are kept (and an env.json it had
not written yet is made as for a folder it never made). The fields the
report's merge check compares (base, patches, build options) are those of a finished target's run,
so that a lost target never makes the merge refuse.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from pathlib import Path, PurePosixPath

from patchkit.errors import LockError, ResultsError
from patchkit.executor.jobs import Job
from patchkit.options import Context
from patchkit.results import Bundle, Status, Step
from patchkit.run import pipeline
from patchkit.workspace import read_json, write_json

COMPARED_META = ("base", "variants", "recipe_info", "backend", "archs")  # copied from a finished run
COMPARED_ENV = ("cmake_flags", "base", "patches")  # what the report's merge check reads of env.json
LOCK_WAIT_S = 30  # a lost node's worker may take a moment to die and free the run folder's lock


def unpack(data: bytes, dest: Path) -> Path:
    """A node's packed run folder as `dest`. Where `dest` holds that very results.json already (the
    node wrote into this work folder), nothing is touched; otherwise `dest` is replaced."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        members = [m for m in tf.getmembers() if _member_ok(m)]
        results = tf.extractfile("results.json")
        if results is None:
            raise ResultsError(f"{dest}: the node's run folder has no results.json")
        if (dest / "results.json").is_file() and (dest / "results.json").read_bytes() == results.read():
            return dest
        incoming = dest.with_name(f".{dest.name}.incoming")
        shutil.rmtree(incoming, ignore_errors=True)
        for m in members:
            target = incoming / m.name
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            if src is not None:
                target.write_bytes(src.read())
    old = dest.with_name(f".{dest.name}.old")
    if dest.exists():
        shutil.rmtree(old, ignore_errors=True)
        dest.rename(old)
    incoming.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def _member_ok(m: tarfile.TarInfo) -> bool:
    """A plain file or folder inside the run folder (no links, devices, absolute or '..' names)."""
    p = PurePosixPath(m.name)
    return (m.isfile() or m.isdir()) and not p.is_absolute() and ".." not in p.parts and m.name not in ("", ".")


def not_run(ctx: Context, job: Job, reason: str, *, like: Path | None) -> Path:
    """The job's run folder in this work folder with every step it did not record NOT_RUN for `reason`;
    made from `like` (a finished target's run) or the recipe where the node left nothing here."""
    dest = ctx.ws.runs(ctx.recipe.name) / job.run_id
    bundle = _open(dest) if (dest / "results.json").is_file() else _create(ctx, job, like)
    if not (dest / "env.json").is_file():  # its node made the folder and was lost before it wrote env.json
        write_json(dest / "env.json", _compared(ctx, job, like)[1])
    with bundle:
        build = f"build:{job.opts.build.config}"
        if bundle.step(build) is None:
            # the options it was to be built with: the merge check compares them
            options = job.opts.build.key_material()
            bundle.record(Step(name=build, status=Status.NOT_RUN, reason=reason, data={"options": options}))
        for _, name in pipeline.wanted(ctx.recipe, job.opts):
            if bundle.step(name) is None:  # a step recorded before the loss (even an error) is kept
                bundle.record(Step(name=name, status=Status.NOT_RUN, reason=reason))
        bundle.set_meta(target=job.target.name, not_run=reason)
    return dest


def _open(dest: Path) -> Bundle:
    """The folder a lost node left here, once its dying worker has let go of the lock."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return Bundle.open(dest, write=True)
        except LockError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _compared(ctx: Context, job: Job, like: Path | None) -> tuple[dict, dict]:
    """(results.json's, env.json's) fields the merge check compares: `like`'s (a finished target's run), else
    what the recipe and the job say (no machine was seen: no env)."""
    if like is None:
        meta = {
            "recipe_info": pipeline.recipe_info(ctx.recipe),
            "backend": job.opts.build.backend,
            "archs": list(job.opts.build.archs),
        }
        return meta, {}
    data = read_json(like / "results.json")
    env = read_json(like / "env.json") if (like / "env.json").is_file() else {}
    meta = {k: data[k] for k in COMPARED_META if isinstance(data, dict) and k in data}
    return meta, {k: env[k] for k in COMPARED_ENV if isinstance(env, dict) and k in env}


def _create(ctx: Context, job: Job, like: Path | None) -> Bundle:
    """A new run folder for a target that left nothing here; its compared fields from `like`."""
    meta, env = _compared(ctx, job, like)
    b = Bundle.create(ctx.ws.runs(ctx.recipe.name), recipe=ctx.recipe.name, run_id=job.run_id, meta=meta)
    write_json(b.path / "env.json", env)  # no machine: none was seen
    return b
