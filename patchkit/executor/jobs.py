"""What an executor is given and gives back: targets, jobs (one whole comparison each) and outcomes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import OptionError
from patchkit.option_set import OPTION
from patchkit.options import RunOptions
from patchkit.workspace import SAFE_RULE, is_safe_component

KINDS = OPTION["executor"].choices  # declared once, with --executor / PATCHKIT_EXECUTOR
DEFAULT_TARGET = "ray"  # --executor ray without --target: one comparison on any node that can run it
_RESOURCE = re.compile(r"[A-Za-z0-9_.:-]+")


@dataclass(frozen=True)
class Target:
    """Where one comparison runs: `name` labels its run folder and the report; `resource` is the Ray
    custom resource of the node(s) that may run it ('' for any node)."""

    name: str
    resource: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecutorOptions:
    kind: str = "local"
    address: str = ""  # ray: the cluster's HOST:PORT ('' = ray.init()'s own choice)
    targets: tuple[Target, ...] = ()


def parse_target(text: str) -> Target:
    """NAME=RESOURCE (e.g. h200=gpu_h200), the name a folder-name part, the resource a Ray resource name."""
    name, sep, resource = text.partition("=")
    if not sep or not name or not resource:
        raise OptionError(f"--target {text!r}: expected NAME=RESOURCE, e.g. h200=gpu_h200")
    if not is_safe_component(name):
        raise OptionError(f"--target {text!r}: the name {name!r} becomes part of a folder name ({SAFE_RULE})")
    if not _RESOURCE.fullmatch(resource):
        raise OptionError(f"--target {text!r}: {resource!r} is not a Ray resource name (letters, digits, _ . : -)")
    return Target(name=name, resource=resource)


def executor_options(kind: str, *, address: str = "", targets: Sequence[str] = ()) -> ExecutorOptions:
    """The executor settings, checked: --address and --target only with `ray`; target names unique."""
    kind = kind or "local"
    if kind not in KINDS:
        raise OptionError(f"--executor {kind!r}: expected one of {', '.join(KINDS)}")
    parsed = tuple(parse_target(t) for t in targets)
    if kind == "local" and (address or parsed):
        what = "--address" if address else "--target"
        raise OptionError(f"{what} needs --executor ray (the local executor runs one comparison here)")
    names = [t.name for t in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OptionError(f"--target: the name {twice[0]!r} is given twice (each target is one run folder)")
    if kind == "ray" and not parsed:
        parsed = (Target(name=DEFAULT_TARGET),)
    return ExecutorOptions(kind=kind, address=address, targets=parsed)


@dataclass(frozen=True, kw_only=True)
class Job:
    """One whole comparison (every variant, every selected step) on one target. `opts.run` is the
    job's run id: the run folder it writes, on whichever node runs it, and in this work folder."""

    target: Target
    opts: RunOptions
    label: str
    not_run_ok: bool  # the exit status counts a step that could not run here as fine (`patchkit run`)

    @property
    def run_id(self) -> str:
        return self.opts.run


@dataclass(kw_only=True)
class Outcome:
    """What became of a job: its run folder in this work folder (None if none came back), its exit
    status (0 every step ok, 1 a step not ok or the target lost, 2 the run stopped on an error), and
    why, if not ok."""

    job: Job
    status: int
    folder: Path | None = None
    lost: str = ""  # why the target has no finished run: "node lost (NodeDiedError: ...)", ...
    error: str = ""  # the error the run stopped with
    where: dict = field(default_factory=dict)  # node id, host, attempts

    @property
    def summary(self) -> str:
        if self.lost:
            return f"not run: {self.lost}"
        if self.error:
            return f"stopped: {self.error}"
        return "ok" if self.status == 0 else "steps not ok (see the report)"
