"""Where the comparisons of a command run: here (`local`, the default: today's pipeline, no Ray) or on
the nodes of a Ray cluster (`ray`), one whole comparison per target, one merged report (docs/ray.md).

    patchkit run --executor ray [--address HOST:PORT] --target h200=gpu_h200 --target l40s=gpu_l40s

A target is a name and a Ray custom resource that labels the machines (or GPU models) that may run it.
Every variant of one comparison is built and timed on one node and one device, never across devices;
targets run side by side.

Modules: jobs (Target, ExecutorOptions, Job, Outcome), targets (run_targets: jobs -> executor -> run
folders -> merged report), local (in this process), ray (the driver: nodes, tasks, retries, lost
nodes; imported only for `ray`), tasks (what runs on a node: build, then measure, the run folder
packed as bytes), gather (run folders unpacked here, lost targets recorded as not run).
"""

from __future__ import annotations

from patchkit.executor.jobs import KINDS, ExecutorOptions, Job, Outcome, Target, executor_options, parse_target
from patchkit.executor.targets import load, run_targets

__all__ = [
    "KINDS",
    "ExecutorOptions",
    "Job",
    "Outcome",
    "Target",
    "executor_options",
    "load",
    "parse_target",
    "run_targets",
]
