"""The command line: parses arguments, calls the stage modules, prints one line per error.

Every PatchkitError is caught here, once, and printed as `patchkit: error: <message>` with exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from patchkit import __version__
from patchkit.errors import PatchkitError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-r", "--recipe", default=None, help="recipe name (recipes/NAME.toml) or path; default: recipes/default.toml")
    p.add_argument("--work", default=None, help="work folder (default: $PATCHKIT_WORK or ./.patchkit)")
    p.add_argument("--offline", action="store_true", help="never use the network; the base must be in the cache")


def _build_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("cuda", "cpu"), default=None, help="default: the recipe's build.backend")
    p.add_argument("--arch", action="append", default=[], help="CUDA architecture(s): 89, '89;90', native (repeatable)")
    p.add_argument("--variant", action="append", default=[], help="only these variants (repeatable), e.g. base, +0001")
    p.add_argument("--jobs", "-j", type=int, default=0, help="parallel build jobs (default: ninja's)")
    p.add_argument("--cmake-option", "-D", action="append", default=[], dest="cmake_option", metavar="OPT", help="extra CMake option, e.g. -D GGML_CUDA_FA_ALL_QUANTS=ON")
    p.add_argument("--leave-one-out", action="store_true", help="also build each patch left out (where no other depends on it)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchkit", description=__doc__)
    parser.add_argument("--version", action="version", version=f"patchkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("fetch", help="materialize the recipe's base in the cache")
    _common(p)

    p = sub.add_parser("apply", help="make one worktree per variant (base, +0001, +0001+0002, ...)")
    _common(p)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--leave-one-out", action="store_true")
    p.add_argument("--force", action="store_true", help="discard uncommitted edits in variant trees")

    p = sub.add_parser("build", help="build every variant with CMake + Ninja")
    _common(p)
    _build_opts(p)
    p.add_argument("--check", action="store_true", help="compile only the translation units the series touches, per arch (no GPU needed)")
    p.add_argument("--force", action="store_true", help="discard uncommitted edits in variant trees")

    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    from patchkit import workflow

    try:
        return getattr(workflow, "cmd_" + args.command.replace("-", "_"))(args)
    except PatchkitError as e:
        print(f"patchkit: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("patchkit: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
