"""`patchkit wheel` and `patchkit wheel-check`: the command line of patchkit.wheel."""

from __future__ import annotations

import argparse
from pathlib import Path

from patchkit.cli.base import Command, add_common, add_options, ctx_of, positive_int, typed
from patchkit.options import build_options
from patchkit.wheel.build import WheelOptions, build_wheel
from patchkit.wheel.check import CheckOptions, check_wheel
from patchkit.workspace import Workspace


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{s!r}: expected a number of seconds above 0")
    return v


def _given_common(args: argparse.Namespace) -> tuple[str, ...]:
    """-r/--work as the user gave them (for the `patchkit build` command a refusal suggests)."""
    out: tuple[str, ...] = ()
    if args.recipe:
        out += ("-r", args.recipe)
    if args.work:
        out += ("--work", args.work)
    return out


class Wheel(Command):
    name = "wheel"
    help = "build a llama-cpp-python wheel whose llama.cpp is one variant (needs its `patchkit build`)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_common(p)
        p.add_argument(
            "--variant", required=True, help="the variant, e.g. +0001+0002 (built first with `patchkit build`)"
        )
        add_options(
            p,
            "build.backend",
            "build.archs",
            build_archs="CUDA architecture(s) as built: 89, '89;90' (repeatable; default: the recipe's)",
        )
        p.add_argument("-o", "--output", default=None, help="folder for the wheel (default: <work>/wheels/<recipe>)")
        add_options(
            p, "build.jobs", build_jobs="parallel compile jobs (CMAKE_BUILD_PARALLEL_LEVEL; default: the build tool's)"
        )
        p.add_argument(
            "--no-isolation",
            action="store_true",
            help="no pip build isolation: use this Python's scikit-build-core (no network needed)",
        )
        p.add_argument(
            "--cmake-option",
            "-D",
            action="append",
            default=[],
            dest="cmake_option",
            metavar="OPT",
            help="extra CMake option for the wheel only, e.g. -D GGML_NATIVE=ON",
        )
        p.add_argument("--rebuild", action="store_true", help="build even if the output folder has this wheel already")

    def run(self, args: argparse.Namespace) -> int:
        ctx = ctx_of(args)
        # backend, arch and -j through the one chain (recipe < PATCHKIT_* < flag), as `patchkit build` has them
        built = build_options(ctx.recipe, {k: v for k, v in typed(args).items() if k in ("backend", "arch", "jobs")})
        opts = WheelOptions(
            variant=args.variant,
            backend=built.backend,
            archs=built.archs,
            jobs=built.jobs,
            cmake_options=tuple(args.cmake_option),
            output=Path(args.output) if args.output else None,
            isolation=not args.no_isolation,
            rebuild=args.rebuild,
            hint_args=_given_common(args),
        )
        build_wheel(ctx, opts)
        return 0


class WheelCheck(Command):
    name = "wheel-check"
    help = "install a patchkit wheel into a fresh virtual environment and generate tokens with it"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("wheel", help="the .whl made by `patchkit wheel`")
        add_options(p, "work", work="work folder for logs (default: $PATCHKIT_WORK or ./.patchkit)")
        p.add_argument(
            "--model",
            default=None,
            help="a GGUF model (default: a synthetic one with the seed's attention shape; needs gguf)",
        )
        p.add_argument("--tokens", type=positive_int, default=16, help="tokens to generate (default 16)")
        p.add_argument(
            "--gpu-layers",
            type=int,
            default=None,
            help="n_gpu_layers (default: all for a CUDA wheel, 0 for a CPU wheel; -1: all)",
        )
        p.add_argument(
            "--find-links", default=None, metavar="DIR", help="install dependencies from DIR only (no index)"
        )
        p.add_argument("--timeout", type=_positive_float, default=600, help="seconds for the generation (default 600)")
        p.add_argument("--json", default=None, help="write the result here (default: next to the log)")

    def run(self, args: argparse.Namespace) -> int:
        opts = CheckOptions(
            wheel=Path(args.wheel),
            model=Path(args.model) if args.model else None,
            tokens=args.tokens,
            gpu_layers=args.gpu_layers,
            find_links=Path(args.find_links) if args.find_links else None,
            timeout=args.timeout,
            json_out=Path(args.json) if args.json else None,
        )
        check_wheel(Workspace.at(args.work), opts)
        return 0


COMMANDS = (Wheel(), WheelCheck())
