"""What every command shares: the Command protocol, the option groups and argument types.

A command is a small class in the table of `patchkit.cli` (west's BUILTIN_COMMAND_GROUPS is the
model): `name`, `help`, `add_arguments(parser)` and `run(args) -> exit status`. `run` turns the parsed
arguments into the stage's typed options (patchkit.options) and calls the stage's API; nothing below
the CLI sees argparse.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import ClassVar

from patchkit import backends
from patchkit.options import Context, context


class Command:
    name: ClassVar[str]
    help: ClassVar[str]

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        """Define this command's options (every option has help)."""

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


def add_common(p: argparse.ArgumentParser) -> None:
    """-r/--recipe, --work, --offline: every command that reads a recipe or the work folder."""
    p.add_argument(
        "-r", "--recipe", default=None, help="recipe name (recipes/NAME.toml) or path; default: recipes/default.toml"
    )
    p.add_argument("--work", default=None, help="work folder (default: $PATCHKIT_WORK or ./.patchkit)")
    p.add_argument("--offline", action="store_true", help="never use the network; the base must be in the cache")


def add_build(p: argparse.ArgumentParser, *, variants: bool = True) -> None:
    """The build options (backend, arch, jobs, CMake options) and the variant selection."""
    p.add_argument("--backend", choices=backends.NAMES, default=None, help="default: the recipe's build.backend")
    p.add_argument("--arch", action="append", default=[], help="CUDA architecture(s): 89, '89;90', native (repeatable)")
    p.add_argument("--jobs", "-j", type=non_negative_int, default=0, help="parallel build jobs (default: ninja's)")
    p.add_argument(
        "--cmake-option",
        "-D",
        action="append",
        default=[],
        dest="cmake_option",
        metavar="OPT",
        help="extra CMake option, e.g. -D GGML_CUDA_FA_ALL_QUANTS=ON",
    )
    p.add_argument(
        "--full-rebuild",
        action="store_true",
        help="recompile every unit that includes a changed file (the recipe's [[affects]] units rules not used)",
    )
    if variants:
        add_variants(p)


def add_variants(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", action="append", default=[], help="only these variants (repeatable), e.g. base, +0001")
    p.add_argument(
        "--leave-one-out", action="store_true", help="also each patch left out (where no other depends on it)"
    )


def ctx_of(args: argparse.Namespace) -> Context:
    """The recipe and work folder named by the common options."""
    return context(recipe=args.recipe, work=args.work, offline=getattr(args, "offline", False))


# --- argument types: errors in the user's words (argparse prints "argument --x: <message>")


def _typed(name: str, conv: Callable[[str], object]) -> Callable[[str], object]:
    def parse(s: str) -> object:
        try:
            return conv(s)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{s!r}: {e}") from None

    parse.__name__ = name
    return parse


def _int_list(s: str) -> tuple[int, ...]:
    parts = [x.strip() for x in s.split(",") if x.strip()]
    if not parts or not all(x.isdigit() for x in parts):
        raise ValueError("expected comma-separated whole numbers, e.g. 0,4096")
    return tuple(int(x) for x in parts)


def _positive(s: str) -> int:
    if not s.strip().isdigit() or int(s) < 1:
        raise ValueError("expected a whole number of at least 1")
    return int(s)


def _non_negative(s: str) -> int:
    if not s.strip().isdigit():
        raise ValueError("expected a whole number (0 or more)")
    return int(s)


int_list = _typed("int_list", _int_list)
positive_int = _typed("positive_int", _positive)
non_negative_int = _typed("non_negative_int", _non_negative)
