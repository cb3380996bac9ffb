"""patchkit's command line: one table of commands (west's BUILTIN_COMMAND_GROUPS is the model).

Every PatchkitError is caught here, once, and printed as `patchkit: error: <message>` with exit 2.
"""

from __future__ import annotations

import argparse
import errno
import sys

from patchkit import __version__, proc
from patchkit.cli import commands, maintain, sweep, wheel
from patchkit.cli.base import Command, finish, sparse_dests
from patchkit.errors import PatchkitError
from patchkit.workspace import work_folder

DESCRIPTION = (
    "Carry performance patches for llama.cpp's ggml backends over a moving upstream: fetch a pinned base, "
    "apply a patch series, build every variant, prove it with test-backend-ops and llama-bench, and write "
    "a PR-ready report whose every number traces to a raw log."
)

GROUPS: tuple[tuple[str, tuple[Command, ...]], ...] = (
    ("pipeline and results", commands.COMMANDS),
    ("series maintenance", maintain.COMMANDS),
    ("search", sweep.COMMANDS),
    ("wheels", wheel.COMMANDS),
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchkit", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"patchkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for _, group in GROUPS:
        for cmd in group:
            p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
            cmd.add_arguments(p)
            p.set_defaults(command_object=cmd, typed_dests=sparse_dests(p))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = finish(make_parser().parse_args(argv))
    try:
        with proc.stop_on_signals():  # SIGINT/SIGTERM/SIGHUP stop every program, held or not
            return args.command_object.run(args)
    except PatchkitError as e:
        print(f"patchkit: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES) and e.filename:  # a folder that turned read-only mid-run
            what = "read-only file system" if e.errno == errno.EROFS else "permission denied"
            print(f"patchkit: error: {e.filename}: cannot write: {what} (what had finished is kept)", file=sys.stderr)
            return 2
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
        where = e.filename or f"writing in {work_folder(getattr(args, 'work', None))}"
        print(
            f"patchkit: error: {where}: {what}; free space there and rerun the same command "
            "(what had finished is kept)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as e:
        code = e.exit_code if isinstance(e, proc.Interrupted) else 130
        print(f"patchkit: {e or 'interrupted'}; rerun the same command to resume", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
