"""The Ray executor: each job (one target's whole comparison) on one node of a Ray cluster.

Per job, on a node the driver picks among the alive ones that have the target's custom resource (and a
GPU for the CUDA backend), pinned there (NodeAffinitySchedulingStrategy, hard):

    build task    num_cpus = --jobs (at most the node's CPUs), {RESOURCE: 1}   tasks.prepare
                  (and num_gpus = 1 for --arch native: nvcc reads the arch off the GPU)
    measure task  num_gpus = 1 (cuda) or 0 (cpu), {RESOURCE: 1}, on the node   tasks.measure
                  the build task returned

so the variants of one comparison are always built and timed on the same machine and device. Each task
runs in a fresh worker (max_calls=1) in the project folder carried by runtime_env working_dir. The
measure task's packed run folder is unpacked into this work folder (patchkit.executor.gather).

A node lost mid-task (NodeDiedError, WorkerCrashedError, ObjectLostError, ...) loses only that job: it
runs once more, from the start, on another alive node with the resource, else it is recorded as
"node lost (<error>)". Ray's own retries are off (max_retries=0): a task retried onto a node that no
longer exists would wait forever; a task pinned to a dead node fails at once instead.
"""

from __future__ import annotations

import logging
import random
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import ray
import ray.exceptions as rex
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from patchkit import backends
from patchkit.errors import OptionError
from patchkit.executor import gather, tasks
from patchkit.executor.jobs import ExecutorOptions, Job, Outcome
from patchkit.options import Context

# what Ray's working_dir leaves behind (gitignore patterns, on top of .gitignore's): history, work
# folders, the committed examples, caches
EXCLUDES = ("/.git", ".patchkit*", "/examples", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache")
LOST = (
    rex.NodeDiedError,
    rex.WorkerCrashedError,
    rex.LocalRayletDiedError,
    rex.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError, ...
    rex.ObjectFetchTimedOutError,
    rex.TaskUnschedulableError,  # pinned to a node that died before the task started
    rex.OutOfMemoryError,
    rex.RaySystemError,
)
ATTEMPTS = 2  # nodes a job is given: a lost job runs once more where another node has its resource
BUSY_TRIES = 30  # a task that met a busy lock runs again, after 1-3 s, at most this many times
CONNECT_S = 10  # --address: how long to wait for the cluster's port to answer


@ray.remote(max_calls=1)
def _prepare(spec: tasks.NodeJob) -> dict:
    return {**tasks.prepare(spec), "node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}


@ray.remote(max_calls=1)
def _measure(spec: tasks.NodeJob, prepared: dict, where: dict) -> dict:
    return tasks.measure(spec, prepared, where)


def project(ctx: Context) -> tuple[Path, str]:
    """The project folder (the one holding recipes/) and the recipe file relative to it."""
    root, path = ctx.recipe.root.resolve(), ctx.recipe.path.resolve()
    if not path.is_relative_to(root):
        raise OptionError(f"{path}: with --executor ray the recipe must be inside its project folder {root}")
    return root, str(path.relative_to(root))


def runtime_env(root: Path, work: Path) -> dict:
    """Ray's runtime_env: the project folder for every task (less EXCLUDES and a work folder inside it)."""
    excludes = list(EXCLUDES)
    if work.is_relative_to(root) and work != root:
        excludes.append(f"/{work.relative_to(root)}")
    return {"working_dir": str(root), "excludes": excludes, "env_vars": {"PATCHKIT_WORK": str(work)}}


def reachable(address: str) -> None:
    """Refuse a HOST:PORT where nothing listens (ray.init would wait minutes for it)."""
    m = re.fullmatch(r"\[?([^\]/]+?)\]?:(\d+)", address)
    if not m:
        return  # '', "auto", "ray://...": ray.init's own
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=CONNECT_S).close()
    except OSError as e:
        raise OptionError(f"--address {address}: no Ray cluster answers there ({e.strerror or e})") from None


def run_jobs(ctx: Context, jobs: list[Job], options: ExecutorOptions) -> list[Outcome]:
    """Every job on the cluster at `options.address` (none: ray.init()'s choice, a new local cluster
    where none runs here); one Outcome per job, in the jobs' order."""
    root, recipe = project(ctx)
    reachable(options.address)
    try:
        ray.init(
            address=options.address or None,
            runtime_env=runtime_env(root, ctx.ws.root),
            log_to_driver=True,  # the nodes' output, each line prefixed "(build-<target> pid=...)"
            logging_level=logging.WARNING,
        )
    except ConnectionError as e:
        raise OptionError(f"--address {options.address}: no Ray cluster to connect to ({e})") from None
    try:
        return _Driver(ctx, recipe, jobs).run()
    finally:
        ray.shutdown()


@dataclass
class _Job:
    job: Job
    spec: tasks.NodeJob
    tried: list[str] = field(default_factory=list)  # node ids it was given, in order
    host: str = ""
    cpus: int = 1  # of the node it was given
    prepared: dict = field(default_factory=dict)
    busy: int = 0
    lost: str = ""  # the last loss

    @property
    def name(self) -> str:
        return self.job.target.name

    @property
    def resources(self) -> dict[str, float]:
        return {self.job.target.resource: 1} if self.job.target.resource else {}

    def fits(self, node: dict) -> bool:
        res = node.get("Resources") or {}
        gpu = not backends.get(self.job.opts.build.backend).needs_gpu or res.get("GPU", 0) >= 1
        need = {"CPU": 1, **self.resources}
        return bool(node.get("Alive")) and gpu and all(res.get(k, 0) >= v for k, v in need.items())


class _Driver:
    def __init__(self, ctx: Context, recipe: str, jobs: list[Job]):
        self.ctx = ctx
        work = str(ctx.ws.root)
        self.jobs = [
            _Job(job=j, spec=tasks.NodeJob(recipe=recipe, work=work, offline=ctx.offline, job=j)) for j in jobs
        ]
        self.pending: dict[ray.ObjectRef, tuple[_Job, str]] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.given: dict[str, int] = {}  # node id -> jobs given to it (the least loaded node is picked)

    def run(self) -> list[Outcome]:
        for j in self.jobs:
            self._start(j)
        while self.pending:
            [ref], _ = ray.wait(list(self.pending), num_returns=1)
            j, stage = self.pending.pop(ref)
            try:
                value = ray.get(ref)
            except rex.RayTaskError as e:
                cause = e.cause or e
                self._stop(j, f"{stage} task failed: {type(cause).__name__}: {_first_line(cause)}")
            except LOST as e:
                self._lost(j, e)
            except rex.RayError as e:
                self._stop(j, f"{stage} task: {type(e).__name__}: {_first_line(e)}")
            else:
                self._advance(j, stage, value)
        return [self.outcomes[j.name] for j in self.jobs]

    # --- the steps of one job

    def _start(self, j: _Job) -> None:
        """Give the job to the least loaded alive node that fits and it was not given yet: its build task."""
        nodes = sorted(
            (n for n in ray.nodes() if j.fits(n) and n["NodeID"] not in j.tried),
            key=lambda n: (self.given.get(n["NodeID"], 0), n["NodeID"]),
        )
        if not nodes:
            need = [f"resource {k!r}" for k in j.resources] + (
                ["a GPU"] if backends.get(j.job.opts.build.backend).needs_gpu else []
            )
            why = j.lost or "no alive node" + (" with " + " and ".join(need) if need else "")
            self._done(j, Outcome(job=j.job, status=1, lost=why))
            return
        node = nodes[0]
        j.tried.append(node["NodeID"])
        j.host = str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "")
        j.cpus = max(1, int((node.get("Resources") or {}).get("CPU", 1)))
        self.given[node["NodeID"]] = self.given.get(node["NodeID"], 0) + 1
        print(f"[{j.name}] on node {node['NodeID'][:12]} ({j.host}), attempt {len(j.tried)}")
        self._prepare(j)

    def _prepare(self, j: _Job) -> None:
        jobs, b = j.job.opts.build.jobs, j.job.opts.build
        ref = _prepare.options(
            name=f"build-{j.name}",
            num_cpus=min(jobs, j.cpus) if jobs else j.cpus,
            num_gpus=1
            if backends.get(b.backend).needs_gpu and "native" in b.archs
            else 0,  # nvcc finds the arch on a GPU
            resources=j.resources,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=j.tried[-1], soft=False),
            max_retries=0,
        ).remote(j.spec)
        self.pending[ref] = (j, "build")

    def _measure(self, j: _Job) -> None:
        where = {"node_id": j.prepared["node_id"], "host": j.prepared["host"], "attempt": len(j.tried)}
        ref = _measure.options(
            name=f"measure-{j.name}",
            num_cpus=1,
            num_gpus=1 if backends.get(j.job.opts.build.backend).needs_gpu else 0,
            resources=j.resources,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=j.prepared["node_id"], soft=False),
            max_retries=0,
        ).remote(j.spec, {k: v for k, v in j.prepared.items() if k in ("builds", "seconds")}, where)
        self.pending[ref] = (j, "measure")

    def _advance(self, j: _Job, stage: str, value: dict) -> None:
        if "busy" in value:
            j.busy += 1
            if j.busy > BUSY_TRIES:
                self._stop(j, f"{stage} task: still busy after {BUSY_TRIES} tries: {value['busy']}")
                return
            print(f"[{j.name}] {value['busy']}; {stage} again")
            time.sleep(random.uniform(1, 3))
            (self._prepare if stage == "build" else self._measure)(j)
        elif "error" in value:
            self._stop(j, value["error"], value)
        elif stage == "build":
            j.prepared = value
            self._measure(j)
        else:
            folder = gather.unpack(value["tar"], self.ctx.ws.runs(self.ctx.recipe.name) / value["folder"])
            self._done(j, Outcome(job=j.job, status=int(value["status"]), folder=folder))

    def _lost(self, j: _Job, e: Exception) -> None:
        j.lost = f"node lost ({type(e).__name__} on node {j.tried[-1][:12]}: {_first_line(e)})"
        print(f"[{j.name}] {j.lost}")
        if len(j.tried) < ATTEMPTS:
            self._start(j)  # another node with the resource, or recorded as lost
        else:
            self._done(j, Outcome(job=j.job, status=1, lost=j.lost))

    def _stop(self, j: _Job, error: str, value: dict | None = None) -> None:
        folder = None
        if value and value.get("tar"):
            folder = gather.unpack(value["tar"], self.ctx.ws.runs(self.ctx.recipe.name) / value["folder"])
        self._done(j, Outcome(job=j.job, status=2, folder=folder, error=error))

    def _done(self, j: _Job, outcome: Outcome) -> None:
        outcome.where = {"nodes": list(j.tried), "host": j.host, "attempts": len(j.tried)}
        self.outcomes[j.name] = outcome


def _first_line(e: BaseException) -> str:
    """The error's first sentence (Ray's go on with advice on where to look), at most 200 characters."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    first = lines[0].split(". ")[0].rstrip(".") if lines else type(e).__name__
    return first if len(first) <= 200 else first[:197] + "..."
