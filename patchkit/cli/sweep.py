"""`patchkit sweep`: the command line of patchkit.sweep (a parameter sweep of one config-table row)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from patchkit import backends, option_set
from patchkit.cli.base import Command, add_common, add_options, ctx_of, non_negative_int, positive_int, typed
from patchkit.measure import env
from patchkit.options import build_options
from patchkit.sweep.gpu import GpuOptions
from patchkit.sweep.occupancy import FILTERS
from patchkit.sweep.run import SweepOptions, run_sweep
from patchkit.sweep.spec import STRATEGIES, SweepError, SweepSpec, load_spec, override, parse_sweep


def spec_of(args: argparse.Namespace, recipe) -> SweepSpec:
    """The spec: --spec FILE, else the recipe's [sweep] table; then the command line's overrides."""
    if args.spec:
        spec = load_spec(Path(args.spec))
    else:
        if not recipe.sweep:  # the recipe keeps [sweep] as written; it is validated here
            raise SweepError(f"{recipe.path}: no [sweep] table; give one with --spec FILE (see docs/sweep.md)")
        spec = parse_sweep(dict(recipe.sweep), f"{recipe.path}: sweep")
    return override(
        spec,
        params=tuple(args.param),
        archs=tuple(args.arch),
        strategy=args.strategy or "",
        target_gpus=tuple(args.target_gpu),
        occupancy_filter=args.occupancy_filter or "",
    )


class Sweep(Command):
    name = "sweep"
    help = "sweep the values of one row of a config table (e.g. the FA MMA config): compile-check, time, pick the best"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_common(p)
        p.add_argument(
            "--spec",
            default=None,
            metavar="FILE",
            help="a TOML file with a [sweep] table (default: the recipe's [sweep]); see docs/sweep.md",
        )
        p.add_argument(
            "--arch",
            action="append",
            default=[],
            help="compile-check architecture(s), e.g. 89 or '89;90' (repeatable; replaces the spec's archs)",
        )
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=V1,V2",
            help="replace one parameter's values, e.g. --param nthreads=64,128 (repeatable)",
        )
        p.add_argument(
            "--strategy",
            choices=STRATEGIES,
            default=None,
            help="grid: time every valid point; halving: "
            "short timing for all, longer for the best third, ... (default: the spec's)",
        )
        p.add_argument(
            "--target-gpu",
            action="append",
            default=[],
            metavar="NAME",
            help="predict occupancy on this GPU, e.g. 'RTX 4070' (repeatable; replaces the spec's predict.targets; "
            "its arch must be compile-checked)",
        )
        p.add_argument(
            "--occupancy-filter",
            choices=FILTERS,
            default=None,
            help="below-start: do not time points predicted below the starting row's blocks per SM on the first "
            "target GPU; none: show the prediction only (default: the spec's predict.filter, else none)",
        )
        p.add_argument("--check-only", action="store_true", help="compile checks only (no GPU needed)")
        add_options(p, "build.jobs", build_jobs="parallel compile jobs (default: ninja's)")
        p.add_argument(
            "--lanes",
            type=positive_int,
            default=1,
            help="points compile-checked at once, each in its own worktree with jobs/lanes jobs (default 1)",
        )
        p.add_argument(
            "--build-arch",
            default=None,
            metavar="A",
            help="the GPU's architecture: the measured build (default: the recipe's build.arch / PATCHKIT_ARCH)",
        )
        add_options(p, "test.jobs", test_jobs="test-backend-ops -j of the test suites")
        p.add_argument(
            "--confirm-rounds",
            type=non_negative_int,
            default=5,
            help="rounds of the winner's confirmation timing (0: no confirmation; default 5)",
        )

    def run(self, args: argparse.Namespace) -> int:
        ctx = ctx_of(args)
        spec = spec_of(args, ctx.recipe)
        # -j, --test-jobs and the kernels' least timed time through the one chain (recipe < PATCHKIT_* < flag)
        got = option_set.resolve(
            ("build.jobs", "test.jobs", "kernel.min_us"), typed(args), os.environ, recipe=ctx.recipe
        )
        jobs = int(got["build.jobs"].value)  # type: ignore[call-overload]
        gpu = None
        if not args.check_only:  # both checked before anything is fetched or written
            arch = {"arch": [args.build_arch]} if args.build_arch else {}  # not given: the chain's
            cli = {"jobs": jobs, "backend": backends.CUDA.name, **arch}
            bopts = build_options(ctx.recipe, cli)
            if len(bopts.archs) != 1 or not bopts.archs[0].isdigit():
                raise SweepError(
                    f"--build-arch: the measured build needs one GPU architecture, e.g. --build-arch 90 (got "
                    f"{';'.join(bopts.archs) or 'none'})"
                )
            if not env.cuda_devices():
                raise SweepError(
                    "patchkit sweep: no CUDA device here (the driver reports none): timing the points needs the "
                    "GPU; run with --check-only for the compile checks"
                )
            gpu = GpuOptions(
                opts=bopts,
                test_jobs=int(got["test.jobs"].value),  # type: ignore[call-overload]
                min_us=int(got["kernel.min_us"].value),  # type: ignore[call-overload]
                confirm_rounds=args.confirm_rounds,
            )
        run_sweep(ctx, spec, SweepOptions(check_only=args.check_only, jobs=jobs, lanes=args.lanes, gpu=gpu))
        return 0


COMMANDS = (Sweep(),)
