"""The commands of the pipeline and its results: fetch, apply, build, test, bench, numerics, run,
model, report, pr, import, reparse, parse. Each turns its arguments into typed options and calls
the stage's API."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from patchkit import backends, option_set, parsers, report
from patchkit import build as build_mod
from patchkit.build import unitcheck
from patchkit.cli import executor as cli_executor
from patchkit.cli import publish
from patchkit.cli.base import (
    Command,
    add_build,
    add_common,
    add_options,
    add_variants,
    ctx_of,
    positive_int,
    resolved,
    typed,
)
from patchkit.errors import PatchkitError, ResultsError
from patchkit.measure.decode import synth_model
from patchkit.option_set import GROUPS
from patchkit.options import build_options_said, describe
from patchkit.results import Bundle, latest_run
from patchkit.run import pipeline, replay, steps
from patchkit.sweep import section
from patchkit.workspace import refuse_own_state


class Fetch(Command):
    name = "fetch"
    help = "materialize the recipe's base in the cache"

    def add_arguments(self, p):
        add_common(p)

    def run(self, args):
        pipeline.fetch(ctx_of(args))
        return 0


class Apply(Command):
    name = "apply"
    help = "make one worktree per variant (base, +0001, +0001+0002, ...)"

    def add_arguments(self, p):
        add_common(p)
        add_variants(p)
        add_options(p, "force")

    def run(self, args):
        ctx = ctx_of(args)
        pipeline.apply(
            ctx, pipeline.fetch(ctx), only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force
        )
        return 0


class Build(Command):
    name = "build"
    help = "build every variant with CMake + Ninja"

    def add_arguments(self, p):
        add_common(p)
        add_build(p)
        p.add_argument(
            "--check",
            action="store_true",
            help="compile only the translation units the series touches, per arch (no GPU needed)",
        )
        add_options(p, "force")

    def run(self, args):
        ctx = ctx_of(args)
        opts, said = build_options_said(ctx.recipe, typed(args))
        print(said)
        base = pipeline.fetch(ctx)
        states = pipeline.apply(ctx, base, only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force)
        if args.check:
            return _check(ctx, base, states, opts)
        t0 = time.monotonic()
        results = build_mod.build_variants(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
        print(built_line(results, time.monotonic() - t0))
        return 0


def built_line(results: list, wall: float) -> str:
    """The build command's last line: the builds' wall seconds, and their sum where builds ran at once (a pool)."""
    built = [r for r in results if not r.reused]
    total = sum(r.seconds for r in built)
    line = f"built {len(built)} of {len(results)} variants in {wall:.0f} s"
    if round(total) > round(wall):  # some built at once: their seconds add up to more than the wall time
        line += f" (their builds' seconds add up to {total:.0f} s: built at once)"
    return line + (f" ({len(results) - len(built)} reused)" if len(built) < len(results) else "")


def _check(ctx, base, states, opts) -> int:
    """`build --check`: exit 0 when every unit the configuration builds compiled, 1 when one failed or
    nothing was compiled (a failed compile is a step failure, not an input error)."""
    items = unitcheck.check(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
    bad = [i for i in items if not i.ok]
    for i in items:
        err = f"  {i.error}" if i.error else (f"  (not compiled: {i.cleared})" if i.cleared else "")
        mark = "left" if i.cleared else "ok  " if i.ok else "FAIL"
        print(f"  {mark} {i.variant:<12} sm_{i.arch:<4} {i.source}{err}")
    left = len(items) - len(unitcheck.compiled(items))
    items = unitcheck.compiled(items)
    if bad:
        b = bad[0]
        print(
            f"patchkit: compile check: {len(bad)}/{len(items)} translation units failed; "
            f"first: {b.source} ({b.variant}, arch {b.arch}): {b.error}",
            file=sys.stderr,
        )
        return 1
    if not items:
        print(f"patchkit: compile check: compiled nothing ({left} units left out)", file=sys.stderr)
        return 1
    print(f"compile check: {len(items)}/{len(items)} translation units compiled", end="")
    print(f", {left} left out (not compiled: see above)" if left else "")
    return 0


# --- the measuring commands: one pipeline, different step selections


def _run_common(p: argparse.ArgumentParser) -> None:
    add_common(p)
    add_build(p)
    add_options(p, *GROUPS["run"])


def _test_opts(p: argparse.ArgumentParser) -> None:
    add_options(p, *GROUPS["test"])


def _kernel_opts(p: argparse.ArgumentParser) -> None:
    add_options(p, *GROUPS["kernel"])


def _decode_opts(p: argparse.ArgumentParser) -> None:
    add_options(p, *GROUPS["decode"], *GROUPS["decode_model"])


def _numerics_opts(p: argparse.ArgumentParser) -> None:
    add_options(p, *GROUPS["numerics"])


def measure(
    args: argparse.Namespace, kinds: tuple[str, ...], *, label: str, not_run_ok: bool, live: bool = False
) -> tuple[Bundle, int]:
    """Resolve the options (before anything is written), run the pipeline, and the exit status (`live`: the
    report rewritten after every step, patchkit.run.live)."""
    ctx, opts = resolved(args, kinds)
    return pipeline.run_with_status(ctx, opts, label=label, not_run_ok=not_run_ok, live=live)


class Test(Command):
    name = "test"
    help = "test-backend-ops test mode on every variant (suites from the recipe)"

    def add_arguments(self, p):
        _run_common(p)
        add_options(p, "test.suites")
        _test_opts(p)

    def run(self, args):
        return measure(args, ("test",), label="test", not_run_ok=False)[1]


class Bench(Command):
    name = "bench"
    help = "bench:kernel (test-backend-ops perf), bench:path or bench:occupancy (ncu), bench:decode (llama-bench)"
    WHAT = steps.bench_steps()  # what -> the steps it runs (the registry's bench:<what> kinds)

    def add_arguments(self, p):
        _run_common(p)
        p.add_argument("what", choices=tuple(self.WHAT), help="the step: " + ", ".join(self.WHAT))
        _kernel_opts(p)
        _decode_opts(p)

    def run(self, args):
        return measure(args, self.WHAT[args.what], label=f"bench-{args.what}", not_run_ok=False)[1]


class Numerics(Command):
    name = "numerics"
    help = "bit-identical outputs? first differences and KL divergence against base"

    def add_arguments(self, p):
        _run_common(p)
        _numerics_opts(p)
        add_options(p, "decode.model", decode_model="a GGUF model (default: the synthetic one)")

    def run(self, args):
        return measure(args, ("numerics",), label="numerics", not_run_ok=False)[1]


class Run(Command):
    name = "run"
    help = "the whole recipe, resumable: fetch, apply, build, every step, report"

    def add_arguments(self, p):
        _run_common(p)
        names = ", ".join(k.name for k in steps.STEPS)
        add_options(p, "skip", skip=f"a step (or step:instance) not to run: {names} (repeatable)")
        p.add_argument("--label", default="", help="suffix of the run folder's name")
        add_options(p, "check_archs")
        _test_opts(p)
        _kernel_opts(p)
        _decode_opts(p)
        _numerics_opts(p)
        cli_executor.add_executor(p)
        p.add_argument(
            "--show-options",
            action="store_true",
            help="print every setting, its value and where it came from (default, recipe, environment, command "
            "line), and exit without running",
        )

    def run(self, args):
        kinds = tuple(k.name for k in steps.STEPS)
        if args.show_options:
            return show_options(args, kinds)
        if cli_executor.distributed(args):  # --executor ray: each target's run on one node, one merged report
            return cli_executor.run(args, kinds, label=args.label or "run", not_run_ok=True)
        bundle, status = measure(args, kinds, label=args.label or "run", not_run_ok=True, live=True)
        report.report_main([bundle.path], "md", bundle.path / "report.md")
        to_report = round(time.time() - pipeline.process_started(), 1)
        if bundle.data.get("timeline"):  # kept after the report is written: the report has wall_s
            bundle.set_meta(timeline={**bundle.data["timeline"], "to_report_s": to_report})
        print(f"report: {bundle.path / 'report.md'} ({to_report:.1f} s from the command to the report)")
        return status


def show_options(args: argparse.Namespace, kinds: tuple[str, ...]) -> int:
    """`patchkit run --show-options`: each setting with its value and source (options.describe); runs
    nothing and writes nothing."""
    ctx = ctx_of(args)
    steps.check_names(tuple(args.skip or ()), "--skip")
    own = option_set.resolve(("recipe", "work"), typed(args), os.environ)
    rows = [("recipe", str(ctx.recipe.path), own["recipe"].source), ("work", str(ctx.ws.root), own["work"].source)]
    rows += describe(ctx.recipe, typed(args), steps=kinds)
    width = max(len(n) for n, _, _ in rows)
    print(f"patchkit run: {len(rows)} settings (value, then where it came from)")
    for name, value, source in rows:
        shown = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
        print(f"  {name:<{width}}  {shown or '-'}  ({source})")
    return 0


class Model(Command):
    name = "model"
    help = "write the synthetic default model (GGUF)"

    def add_arguments(self, p):
        add_common(p)
        p.add_argument("action", choices=("synth",), help="synth: the recipe's synthetic model")
        p.add_argument("-o", "--output", default=None, help="where to write it (default: the work folder's cache)")

    def run(self, args):
        ctx = ctx_of(args)
        if args.output:
            refuse_own_state(args.output, protect=_recipe_files(args))
        pipeline.fetch(ctx)
        path, info = synth_model(ctx, Path(args.output) if args.output else None)
        print(f"{path}: {info.get('n_params')} parameters, {info.get('file_size')} bytes")
        return 0


class Report(Command):
    name = "report"
    help = "render the PR description from stored results"

    def add_arguments(self, p):
        add_common(p)
        p.add_argument("runs", nargs="*", help="run folders (default: the recipe's latest run)")
        p.add_argument("--format", choices=("md", "json"), default="md", help="markdown (default) or the evidence JSON")
        p.add_argument("-o", "--output", default=None, help="write here instead of standard output")
        p.add_argument("--force", action="store_true", help="merge runs even where fingerprints differ")
        p.add_argument(
            "--sweep",
            action="append",
            default=[],
            metavar="FOLDER",
            help="add the 'Parameter sweep' section of this sweep folder (repeatable; markdown only)",
        )

    def run(self, args):
        paths = [Path(p) for p in args.runs]
        if not paths:
            ctx = ctx_of(args)
            paths = [latest_run(ctx.ws.runs(ctx.recipe.name))]
        out = Path(args.output) if args.output else None
        if out is not None:
            refuse_own_state(out, protect=_recipe_files(args))
        sweeps = [Path(p) for p in args.sweep]
        section.check(sweeps)  # before anything is written, whatever the format
        blocks = section.markdown(sweeps) if args.format == "md" else []
        return report.report_main(paths, args.format, out, force=args.force, sweep=blocks)


def _recipe_files(args: argparse.Namespace) -> list[Path]:
    """The recipe and its patch files (never an output's target), when the recipe can be read."""
    try:
        recipe = ctx_of(args).recipe
    except PatchkitError:
        return []
    return [recipe.path, *(recipe.patch_path(p) for p in recipe.series)]


class Pr(Command):
    name = "pr"
    help = (
        "replace the body of your existing PR with the report, after showing the diff and a confirmation "
        "(never opens a PR; token from $GITHUB_TOKEN)"
    )

    def add_arguments(self, p):
        add_common(p)
        p.add_argument("--repo", required=True, help="OWNER/NAME")
        p.add_argument("--number", type=positive_int, default=None, help="the number of your PR, opened on GitHub")
        p.add_argument("--head", default=None, help="refused: patchkit never opens pull requests")
        p.add_argument(
            "--report", default=None, help="the report markdown (default: report.md of the recipe's latest run)"
        )
        p.add_argument("--api", default=publish.API, help="the GitHub REST API root (https only)")
        once = p.add_mutually_exclusive_group()
        once.add_argument(
            "--confirm", default=None, metavar="DIGEST", help="send the change whose diff printed this digest"
        )
        once.add_argument("--dry-run", action="store_true", help="print the diff and its digest; send nothing")

    def run(self, args):
        if args.head or args.number is None:
            raise PatchkitError(publish.NEVER_OPENS.replace("OWNER/NAME", args.repo))
        if args.offline:
            raise PatchkitError("--offline: patchkit pr reads and updates the PR on GitHub; nothing sent")
        if args.report:
            report_md = Path(args.report)
        else:
            ctx = ctx_of(args)
            report_md = latest_run(ctx.ws.runs(ctx.recipe.name)) / "report.md"
        return publish.pr_main(
            report_md,
            args.repo,
            args.number,
            confirm=args.confirm,
            dry_run=args.dry_run,
            ask=publish.terminal_ask(),
            api=args.api,
        )


class Import(Command):
    name = "import"
    help = "add logs of a run made elsewhere to a results bundle and parse them into its step"

    def add_arguments(self, p):
        add_common(p)
        p.add_argument(
            "--tool",
            required=True,
            choices=tuple(steps.IMPORT_TOOLS),
            help="the tool that wrote the logs: " + ", ".join(f"{t} ({k.name})" for t, k in steps.IMPORT_TOOLS.items()),
        )
        p.add_argument(
            "--log",
            action="append",
            required=True,
            metavar="VARIANT=FILE",
            help="a log and the variant it ran (repeat; a variant's second log is its second round)",
        )
        p.add_argument("--suite", default="flash_attn", help="for test-backend-ops logs: the recipe suite they ran")
        p.add_argument(
            "--backend",
            choices=backends.NAMES,
            default=backends.CUDA.name,
            help="the backend the logs ran on (default: cuda)",
        )
        p.add_argument("--run", default=None, help="add to this run folder (default: a new run folder)")
        p.add_argument(
            "--env", default=None, help="env.json of the machine the logs come from (patchkit's fingerprint)"
        )

    def run(self, args):
        ctx = ctx_of(args)
        pairs = []
        for item in args.log:
            v, sep, f = item.partition("=")
            if not sep or not v or not f:
                raise ResultsError(f"import: --log {item!r}: expected VARIANT=FILE")
            pairs.append((v, Path(f)))
        req = replay.ImportRequest(
            tool=args.tool,
            logs=tuple(pairs),
            suite=args.suite,
            backend=args.backend,
            run=args.run or "",
            env=Path(args.env) if args.env else None,
        )
        return 0 if replay.import_logs(ctx, req).status.value == "ok" else 1


class Reparse(Command):
    name = "reparse"
    help = "re-derive steps of a run from its raw logs (after a parser fix, or logs imported from elsewhere)"

    def add_arguments(self, p):
        add_common(p)
        p.add_argument("run", help="run folder")
        p.add_argument(
            "--step",
            action="append",
            required=True,
            help="a step name of the run: " + ", ".join(f"{k.name}" for k in steps.STEPS if k.reparse),
        )

    def run(self, args):
        steps.check_names(tuple(args.step), "--step")
        bundle = Bundle.open(Path(args.run), write=True)
        recipe = ctx_of(args).recipe
        for name in args.step:
            pipeline.record(bundle, replay.reparse_step(bundle, name, recipe))
        return 0


class Parse(Command):
    name = "parse"
    help = "print the parsed records of a tool's output as JSON"
    TOOLS = {
        "test-backend-ops": lambda text, f: parsers.parse_test_console(text, f).to_dict(),
        "perf-sql": lambda text, f: [r.to_dict() for r in parsers.parse_perf_sql(text, f)],
        "perf": lambda text, f: [r.to_dict() for r in parsers.parse_perf_console(text, f)],
        "llama-bench": lambda text, f: [r.to_dict() for r in parsers.parse_llama_bench_json(text, f)],
        "llama-bench-jsonl": lambda text, f: [r.to_dict() for r in parsers.parse_llama_bench_jsonl(text, f)],
        "ncu": lambda text, f: [r.to_dict() for r in parsers.parse_ncu_csv(text, f)],
    }

    def add_arguments(self, p):
        p.add_argument("--tool", required=True, choices=tuple(self.TOOLS), help="the tool whose output FILE holds")
        p.add_argument("file", help="the tool's output (a raw log of a run folder, or the tool's own output)")

    def run(self, args):
        text = parsers.read_log(args.file)
        print(json.dumps(self.TOOLS[args.tool](text, args.file), indent=2, sort_keys=True, default=str))
        return 0


COMMANDS: tuple[Command, ...] = (
    Fetch(),
    Apply(),
    Build(),
    Test(),
    Bench(),
    Numerics(),
    Run(),
    Model(),
    Report(),
    Pr(),
    Import(),
    Reparse(),
    Parse(),
)
