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

from patchkit.option_set import GROUPS, OPTION
from patchkit.options import Context, RunOptions, context, defaults_line, resolve_run
from patchkit.run import steps


class Command:
    name: ClassVar[str]
    help: ClassVar[str]

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        """Define this command's options (every option has help)."""

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


def add_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, *names: str, **help: str) -> None:
    """The argparse arguments of these settings, generated from their one declaration
    (patchkit.option_set); `help` replaces a setting's help where a command says it its own way."""
    for name in names:
        o = OPTION[name]
        kw: dict = {"help": help.get(name.replace(".", "_"), o.help)}
        if o.flags[0].startswith("-"):
            kw["dest"] = o.arg
            kw["default"] = [] if o.action == "append" else False if o.action.startswith("store") else None
        if o.action:
            kw["action"] = "store_true" if o.action == "store_false" else o.action
        if o.arg_type:
            kw["type"] = ARG_TYPES[o.arg_type]
        for k in ("choices", "metavar", "nargs"):
            if getattr(o, k):
                kw[k] = getattr(o, k)
        p.add_argument(*o.flags, **kw)


def add_common(p: argparse.ArgumentParser) -> None:
    """-r/--recipe, --work, --offline: every command that reads a recipe or the work folder."""
    add_options(p, *GROUPS["common"])


def add_build(p: argparse.ArgumentParser, *, variants: bool = True) -> None:
    """The build options (backend, arch, jobs, CMake options) and the variant selection."""
    add_options(p, *GROUPS["build"])
    if variants:
        add_variants(p)


def add_variants(p: argparse.ArgumentParser) -> None:
    add_options(p, *GROUPS["variants"])


def ctx_of(args: argparse.Namespace) -> Context:
    """The recipe and work folder named by the common options."""
    return context(recipe=args.recipe, work=args.work, offline=getattr(args, "offline", False))


def resolved(args: argparse.Namespace, kinds: tuple[str, ...]) -> tuple[Context, RunOptions]:
    """The context and the run's options, checked before anything is written; the fast defaults' line."""
    ctx = ctx_of(args)
    steps.check_names(tuple(getattr(args, "skip", None) or ()), "--skip")
    opts = resolve_run(ctx.recipe, vars(args), steps=kinds)
    steps.check_instances(tuple(getattr(args, "skip", None) or ()), "--skip", ctx.recipe, opts)
    print(defaults_line(opts), flush=True)
    return ctx, opts


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
ARG_TYPES = {"int_list": int_list, "positive": positive_int, "non_negative": non_negative_int}
