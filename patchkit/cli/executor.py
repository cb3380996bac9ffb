"""The executor options of the measuring commands (`patchkit run`; later `patchkit sweep`): where the
comparison runs. `--executor local` (the default) is today's pipeline in this process; `--executor
ray` runs one whole comparison per `--target` on the nodes of a Ray cluster and merges their run
folders into one report (patchkit.executor, docs/ray.md)."""

from __future__ import annotations

import argparse
import os

from patchkit import executor, option_set
from patchkit.cli.base import add_options, resolved, typed


def add_executor(p: argparse.ArgumentParser) -> None:
    """--executor, --address, --target (an argument group of their own)."""
    g = p.add_argument_group("where it runs (docs/ray.md)")
    add_options(g, "executor")
    g.add_argument(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="ray: the cluster to use (default: $RAY_ADDRESS, else a cluster started here by `ray start`, "
        "else a new local one)",
    )
    g.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME=RESOURCE",
        help="ray: run the comparison on a node with this Ray custom resource, labelled NAME in its run "
        "folder and the report, e.g. h200=gpu_h200 (repeatable; default: one target on any node)",
    )


def executor_of(args: argparse.Namespace) -> executor.ExecutorOptions:
    """The executor settings of the command line (> $PATCHKIT_EXECUTOR > local), checked."""
    kind = option_set.resolve_one(option_set.OPTION["executor"], typed(args), os.environ).value
    return executor.executor_options(
        str(kind), address=getattr(args, "address", None) or "", targets=tuple(getattr(args, "target", None) or ())
    )


def distributed(args: argparse.Namespace) -> bool:
    """Whether the command runs through an executor other than the local one."""
    return executor_of(args).kind != "local"


def run(args: argparse.Namespace, kinds: tuple[str, ...], *, label: str, not_run_ok: bool) -> int:
    """Resolve the options (before anything is written), run every target through the executor, render
    the merged report; the exit status (0 all ok, 1 a step not ok or a target lost, 2 a run stopped)."""
    exe = executor_of(args)
    ctx, opts = resolved(args, kinds)
    return executor.run_targets(ctx, opts, exe, label=label, not_run_ok=not_run_ok)
