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

from patchkit.option_set import GROUPS, OPTION, OPTIONS
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
    (patchkit.option_set); `help` replaces a setting's help where a command says it its own way. They
    are sparse (nox's way: argparse.SUPPRESS): only what was typed is parsed (`typed`), so the one chain
    knows its source exactly and 0, '' and false typed are values."""
    for name in names:
        o = OPTION[name]
        kw: dict = {"help": help.get(name.replace(".", "_"), o.help), "default": argparse.SUPPRESS}
        if o.flags[0].startswith("-"):
            kw["dest"] = o.arg
        if o.action:
            kw["action"] = "store_true" if o.action == "store_false" else o.action
        if o.arg_type:
            kw["type"] = ARG_TYPES[o.arg_type]
        for k in ("choices", "metavar", "nargs"):
            if getattr(o, k):
                kw[k] = getattr(o, k)
        p.add_argument(*o.flags, **kw)


# the value a declared setting's argument reads as in the Namespace when it was not typed (`finish`)
_UNTYPED = {
    o.arg: [] if o.action == "append" or o.nargs else False if o.action.startswith("store") else None
    for o in OPTIONS
    if o.arg
}


def sparse_dests(p: argparse.ArgumentParser) -> frozenset[str]:
    """The destinations of a command's declared settings (their arguments parse sparsely)."""
    return frozenset(d for d in _UNTYPED if p.get_default(d) is argparse.SUPPRESS)


def finish(args: argparse.Namespace) -> argparse.Namespace:
    """After parsing: `args.typed` holds what was typed of the declared settings (the one chain's command
    line layer), and each one not typed reads as empty (None, False, []) in `args` for the command's own use."""
    dests = getattr(args, "typed_dests", frozenset())
    args.typed = {d: getattr(args, d) for d in dests if hasattr(args, d)}
    for d in dests - set(args.typed):
        setattr(args, d, _UNTYPED[d])
    return args


def typed(args: argparse.Namespace) -> dict[str, object]:
    """The command line's layer of the one chain: the declared settings that were typed, {dest: value}."""
    if hasattr(args, "typed"):
        return dict(args.typed)
    return {k: v for k, v in vars(args).items() if k in _UNTYPED}  # parsed and not finished: only what was typed


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
    return context(recipe=args.recipe, work=args.work, offline=bool(getattr(args, "offline", False)))


def resolved(args: argparse.Namespace, kinds: tuple[str, ...]) -> tuple[Context, RunOptions]:
    """The context and the run's options, checked before anything is written; the fast defaults' line."""
    ctx = ctx_of(args)
    steps.check_names(tuple(getattr(args, "skip", None) or ()), "--skip")
    opts = resolve_run(ctx.recipe, typed(args), steps=kinds)
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
