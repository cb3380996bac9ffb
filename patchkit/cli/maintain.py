"""`patchkit rebase`, `patchkit refresh` and `patchkit newest-base`: the command line of patchkit.maintain."""

from __future__ import annotations

import argparse

from patchkit import backends
from patchkit.build import BuildOptions
from patchkit.cli.base import Command, add_build, add_common, add_options, ctx_of, typed
from patchkit.maintain import bases, newest, rebase, refresh
from patchkit.maintain.trial import render_table
from patchkit.options import Context, build_options, resolve_run
from patchkit.recipe import Recipe
from patchkit.results import Bundle
from patchkit.run import pipeline


def _trial_build_options(recipe: Recipe, args: argparse.Namespace) -> BuildOptions:
    """The build options of trial builds: CPU unless --backend cuda; -D, -j, --arch as for `patchkit build`."""
    return build_options(recipe, {"backend": backends.CPU.name, **typed(args)})


def _run_tests(ctx: Context, args: argparse.Namespace) -> rebase.RunTests:
    """Build and test the given suites of a trial recipe in one run folder (runs/<trial recipe>/)."""

    def run_tests(tr: Recipe, suites: tuple[str, ...]) -> Bundle:
        # the pipeline's own entry (options.resolve_run, then pipeline.run), as `patchkit test` calls it
        cli = {
            "backend": backends.CPU.name,
            **typed(args),
            "suites": suites,
            "force": True,
            "label": "rebase",
        }
        opts = resolve_run(tr, cli, steps=("test",))
        return pipeline.run(Context(recipe=tr, ws=ctx.ws, offline=ctx.offline), opts, label="rebase")

    return run_tests


def _add_variant(p: argparse.ArgumentParser) -> None:
    add_options(p, "variants")


class Rebase(Command):
    name = "rebase"
    help = "try every patch of the series on another base; optionally write a rebased recipe"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_common(p)
        add_build(p, variants=False)
        _add_variant(p)
        p.add_argument(
            "--onto",
            required=True,
            metavar="BASE",
            help="a full upstream commit, or sdist:VERSION[:SHA256] (a llama-cpp-python sdist)",
        )
        p.add_argument(
            "--git-url", default="", help="where to fetch a commit from (default: the recipe's [base.git] url)"
        )
        p.add_argument("--sha256", default="", help="the sdist's sha256 (default: from the index's JSON simple API)")
        p.add_argument(
            "--write",
            action="store_true",
            help="write patches-<base>/ and recipes/<name>-<base>.toml (refused on conflicts)",
        )
        p.add_argument(
            "--build",
            action="store_true",
            help="build the new base and every prefix that applies (CPU unless --backend cuda)",
        )
        p.add_argument(
            "--test",
            action="append",
            nargs="?",
            const="all",
            metavar="SUITE",
            help="run a recipe suite on every prefix (repeatable; no name: all)",
        )

    def run(self, args: argparse.Namespace) -> int:
        ctx = ctx_of(args)
        onto = bases.parse_onto(args.onto)
        given = list(args.test or [])
        tests = tuple(ctx.recipe.suites) if "all" in given else tuple(dict.fromkeys(given))
        res = rebase.rebase(
            ctx.recipe,
            ctx.ws,
            onto,
            git_url=args.git_url or "",
            sha256=args.sha256 or "",
            offline=ctx.offline,
            build=_trial_build_options(ctx.recipe, args) if args.build or tests else None,
            variants=tuple(args.variant),
            tests=tests,
            run_tests=_run_tests(ctx, args),
        )
        title = (
            f"rebase {ctx.recipe.name} onto {onto.text} ({bases.describe(res.new)}), from {bases.short(res.old.commit)}"
        )
        print(render_table(title, res.new_trial))
        if res.built is not None:
            for v, b in res.built["builds"].items():
                print(f"build {v} ({res.built['config']}): {'ok' if b['ok'] else 'FAILED: ' + b['error']}")
            for s, t in res.built["tests"].items():
                print(f"test {s}: {t['status']}{' (' + t['reason'] + ')' if t.get('reason') else ''}")
        print(f"rebase report: {res.path}")
        if args.write:
            w = rebase.write_rebased(res, ctx.recipe, ctx.ws)
            for old, rel in w.patches.items():
                print(f"{'wrote' if ctx.recipe.root / rel in w.wrote else 'unchanged'} {rel} (from {old})")
            for f in w.dropped:
                print(f"dropped {f}: already upstream")
            print(f"{'wrote' if w.recipe in w.wrote else 'unchanged'} {w.recipe}")
        return res.exit_status


class Refresh(Command):
    name = "refresh"
    help = "write the patch files again from the commits of a variant tree"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_common(p)
        p.add_argument("--variant", default=None, help="the variant tree to export (default: the whole series)")

    def run(self, args: argparse.Namespace) -> int:
        ctx = ctx_of(args)
        done = refresh.refresh(ctx.recipe, ctx.ws, variant=args.variant, offline=ctx.offline)
        for f, how in done.changed:
            print(f"{how}: {f}")
        if done.recorded:
            print(f"variant {done.variant}: recorded as up to date with the refreshed patch files")
        print(f"refresh: {len(done.changed)} file(s) changed, {len(done.files) - len(done.changed)} unchanged")
        return 0


class NewestBase(Command):
    name = "newest-base"
    help = "the newest of several candidate bases that the whole series applies to"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_common(p)
        add_build(p, variants=False)
        p.add_argument(
            "--candidates",
            nargs="+",
            required=True,
            metavar="BASE",
            help="commits or sdist:VERSION[:SHA256], oldest to newest",
        )
        p.add_argument(
            "--git-url", default="", help="where to fetch commits from (default: the recipe's [base.git] url)"
        )
        p.add_argument(
            "--build", action="store_true", help="also require that every prefix builds (CPU unless --backend cuda)"
        )
        _add_variant(p)

    def run(self, args: argparse.Namespace) -> int:
        ctx = ctx_of(args)
        cands = [bases.parse_onto(c) for c in args.candidates]
        res = newest.newest_base(
            ctx.recipe,
            ctx.ws,
            cands,
            git_url=args.git_url or "",
            offline=ctx.offline,
            build=_trial_build_options(ctx.recipe, args) if args.build else None,
            variants=tuple(args.variant),
        )
        for c in res.candidates:
            if c.trial is None or c.info is None:
                print(f"{c.text}: ERROR: {c.error}")
            else:
                print(render_table(f"{c.text} ({bases.describe(c.info)})", c.trial))
                print("  " + c.route)
                if c.contains:
                    print("  " + c.contains_line())
        for c in reversed(res.candidates):
            if c.build is not None:
                bad = [b["error"] for b in c.build["builds"].values() if not b["ok"]]
                print(f"{c.text}: build {'FAILED: ' + bad[0] if bad else 'ok'}")
        if res.best is None:
            print(
                f"newest base: none of the {len(res.candidates)} candidates takes the whole series as a change"
                f"{' and builds' if args.build else ''}"
            )
            print(f"report: {res.path}")
            return 1
        assert res.best.info is not None
        print(f"newest base: {res.best.text} ({bases.short(res.best.info.commit)})")
        print(bases.route_line(res.best.text, res.best.base, res.best.info, ctx.ws))
        print(f"report: {res.path}")
        return 0


COMMANDS = (Rebase(), Refresh(), NewestBase())
