"""The command line: parses arguments, calls the stage modules, prints one line per error.

Every PatchkitError is caught here, once, and printed as `patchkit: error: <message>` with exit 2.
"""

from __future__ import annotations

import argparse
import sys

from patchkit import __version__
from patchkit.errors import PatchkitError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-r", "--recipe", default=None, help="recipe name (recipes/NAME.toml) or path; default: recipes/default.toml"
    )
    p.add_argument("--work", default=None, help="work folder (default: $PATCHKIT_WORK or ./.patchkit)")
    p.add_argument("--offline", action="store_true", help="never use the network; the base must be in the cache")


def _build_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("cuda", "cpu"), default=None, help="default: the recipe's build.backend")
    p.add_argument("--arch", action="append", default=[], help="CUDA architecture(s): 89, '89;90', native (repeatable)")
    p.add_argument("--variant", action="append", default=[], help="only these variants (repeatable), e.g. base, +0001")
    p.add_argument("--jobs", "-j", type=int, default=0, help="parallel build jobs (default: ninja's)")
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
        "--leave-one-out", action="store_true", help="also build each patch left out (where no other depends on it)"
    )


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
    p.add_argument(
        "--check",
        action="store_true",
        help="compile only the translation units the series touches, per arch (no GPU needed)",
    )
    p.add_argument("--force", action="store_true", help="discard uncommitted edits in variant trees")

    def run_opts(p: argparse.ArgumentParser) -> None:
        _common(p)
        _build_opts(p)
        p.add_argument("--run", default=None, help="resume (or name) this run folder instead of starting a new one")
        p.add_argument("--redo", action="store_true", help="redo steps that finished in this run")
        p.add_argument("--force", action="store_true", help="discard uncommitted edits in variant trees")

    p = sub.add_parser("test", help="test-backend-ops test mode on every variant (suites from the recipe)")
    run_opts(p)
    p.add_argument("suites", nargs="*", help="suite names from the recipe's [suites] (default: all)")
    p.add_argument("--filter", "-p", default=None, help="extra test-backend-ops -p regex (a subset of the suite)")
    p.add_argument("--test-jobs", type=int, default=0, help="test-backend-ops -j (parallel test workers)")

    p = sub.add_parser("bench", help="kernel timing (test-backend-ops perf), kernel path (ncu) or decode (llama-bench)")
    run_opts(p)
    p.add_argument("what", choices=("kernel", "path", "decode"))
    p.add_argument("--rounds", type=int, default=0, help="interleaved rounds (default: recipe)")
    p.add_argument("--params", default=None, help="test-backend-ops -p regex for kernel cases (default: recipe)")
    p.add_argument("--test-file", default=None, help="exact test-backend-ops --test-file for kernel cases")
    p.add_argument(
        "--depths", type=lambda s: tuple(int(x) for x in s.split(",")), default=None, help="decode depths, e.g. 0,32768"
    )
    p.add_argument("--n-gen", type=int, default=0)
    p.add_argument("--repetitions", type=int, default=0)

    p = sub.add_parser("numerics", help="bit-identical outputs? first differences and KL divergence against base")
    run_opts(p)
    p.add_argument("--numerics-depths", type=lambda s: tuple(int(x) for x in s.split(",")), default=None)

    p = sub.add_parser("run", help="the whole recipe, resumable: fetch, apply, build, test, bench, numerics, report")
    run_opts(p)
    p.add_argument(
        "--skip", action="append", choices=("test", "bench-kernel", "kernel-path", "bench-decode", "numerics")
    )
    p.add_argument("--label", default="", help="suffix of the run folder's name")
    p.add_argument(
        "--check-arch",
        action="append",
        default=[],
        help="also compile-check the touched translation units for this CUDA arch (repeatable)",
    )
    p.add_argument(
        "--test-variant", action="append", default=[], help="run the test suites only on these variants (default: all)"
    )
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--depths", type=lambda s: tuple(int(x) for x in s.split(",")), default=None)
    p.add_argument("--numerics-depths", type=lambda s: tuple(int(x) for x in s.split(",")), default=None)
    p.add_argument("--filter", "-p", default=None, help="extra test-backend-ops -p regex for the test suites")
    p.add_argument("--test-jobs", type=int, default=0)
    p.add_argument("--n-gen", type=int, default=0)
    p.add_argument("--repetitions", type=int, default=0)
    p.add_argument("--params", default=None, help="test-backend-ops -p regex for kernel cases (default: recipe)")
    p.add_argument("--test-file", default=None)
    p.set_defaults(suites=None)

    p = sub.add_parser("model", help="write the synthetic default model (GGUF)")
    _common(p)
    p.add_argument("action", choices=("synth",))
    p.add_argument("-o", "--output", default=None)

    p = sub.add_parser("report", help="render the PR description from stored results")
    _common(p)
    p.add_argument("runs", nargs="*", help="run folders (default: the recipe's latest run)")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--force", action="store_true", help="merge runs even where fingerprints differ")

    p = sub.add_parser(
        "pr", help="create or update the PR body on GitHub from a rendered report (token from $GITHUB_TOKEN)"
    )
    _common(p)
    p.add_argument("--repo", required=True, help="OWNER/NAME")
    p.add_argument(
        "--number", type=int, default=None, help="update this PR's body; without it a PR is created (needs --head)"
    )
    p.add_argument("--head", default=None, help="branch of the PR to create, e.g. me:my-branch")
    p.add_argument("--base", default="master")
    p.add_argument("--report", default=None, help="the report markdown (default: report.md of the recipe's latest run)")
    p.add_argument("--api", default="https://api.github.com")
    p.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")

    p = sub.add_parser(
        "import", help="add logs of a run made elsewhere to a results bundle and parse them into its step"
    )
    _common(p)
    p.add_argument("--tool", required=True, choices=("llama-bench", "perf-sql", "test-backend-ops"))
    p.add_argument(
        "--log",
        action="append",
        required=True,
        metavar="VARIANT=FILE",
        help="a log and the variant it ran (repeat; a variant's second log is its second round)",
    )
    p.add_argument("--suite", default="flash_attn", help="for test-backend-ops logs: the recipe suite they ran")
    p.add_argument("--backend", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--run", default=None, help="add to this run folder (default: a new run folder)")
    p.add_argument("--env", default=None, help="env.json of the machine the logs come from (patchkit's fingerprint)")

    p = sub.add_parser(
        "reparse",
        help="re-derive steps of a run from its raw logs (after a parser fix, or logs imported from elsewhere)",
    )
    _common(p)
    p.add_argument("run", help="run folder")
    p.add_argument(
        "--step", action="append", required=True, help="test:<suite>, bench:kernel, kernel-path, bench:decode"
    )

    p = sub.add_parser("parse", help="print the parsed records of a tool's output as JSON")
    p.add_argument(
        "--tool",
        required=True,
        choices=("test-backend-ops", "perf-sql", "perf", "llama-bench", "llama-bench-jsonl", "ncu"),
    )
    p.add_argument("file")

    # commands that live with their stage (each module: add_parsers(sub, common, build_opts) and
    # set_defaults(func=...) on its parsers)
    import importlib

    for name in ("maintain", "wheel", "wheel_check"):
        try:
            mod = importlib.import_module(f"patchkit.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"patchkit.{name}":
                raise
            continue
        mod.add_parsers(sub, _common, _build_opts)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    from patchkit import workflow

    try:
        func = getattr(args, "func", None) or getattr(workflow, "cmd_" + args.command.replace("-", "_"))
        return func(args)
    except PatchkitError as e:
        print(f"patchkit: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("patchkit: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
