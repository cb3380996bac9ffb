"""The workflow as small named steps, shared by the CLI commands and the resumable pipeline.

Each `cmd_*` function takes the parsed CLI arguments; the stage modules hold the real work.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import build as build_mod
from patchkit import series, source
from patchkit.errors import ApplyError, BuildError
from patchkit.recipe import Recipe, load_recipe
from patchkit.workspace import Workspace


@dataclass(frozen=True, kw_only=True)
class Context:
    recipe: Recipe
    ws: Workspace
    offline: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Context":
        return cls(recipe=load_recipe(args.recipe), ws=Workspace.at(args.work), offline=getattr(args, "offline", False))

    @property
    def logs(self) -> Path:
        return self.ws.root / "logs" / self.recipe.name


def step_fetch(ctx: Context) -> source.BaseInfo:
    info = source.fetch(ctx.recipe.base, ctx.ws, offline=ctx.offline)
    how = "upstream commit, verified" if info.upstream_verified else "import commit"
    print(f"base {info.key}: {info.commit} ({how})")
    return info


def step_apply(ctx: Context, base: source.BaseInfo, *, only: tuple[str, ...] = (), leave_one_out: bool = False, force: bool = False) -> list[series.VariantState]:
    variants = series.plan_variants(ctx.recipe, leave_one_out=leave_one_out, only=only)
    states, errors = series.apply_all(ctx.recipe, base, ctx.ws, variants, force=force)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise ApplyError(f"{len(errors)} variants failed; first: {errors[0]}")
    return states


def cmd_fetch(args: argparse.Namespace) -> int:
    step_fetch(Context.from_args(args))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    step_apply(ctx, step_fetch(ctx), only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    base = step_fetch(ctx)
    states = step_apply(ctx, base, only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force)
    opts = build_mod.options_from(ctx.recipe, backend=args.backend, archs=tuple(args.arch), jobs=args.jobs, extra=tuple(f"-D{o}" if not o.startswith("-") else o for o in args.cmake_option))
    if args.check:
        items = build_mod.check(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
        bad = [i for i in items if not i.ok]
        for i in items:
            print(f"  {'ok  ' if i.ok else 'FAIL'} {i.variant:<12} sm_{i.arch:<4} {i.source}{'  ' + i.error if i.error else ''}")
        if bad:
            raise BuildError(f"compile check: {len(bad)}/{len(items)} translation units failed; first: {bad[0].source} ({bad[0].variant}, arch {bad[0].arch}): {bad[0].error}")
        print(f"compile check: {len(items)}/{len(items)} translation units compiled")
        return 0
    t0 = time.monotonic()
    results = build_mod.build_variants(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
    print(f"built {len(results)} variants in {time.monotonic() - t0:.0f} s")
    return 0
