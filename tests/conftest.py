"""Helpers for every tier.

`patchkit_main` runs the command line in this process (`patchkit.cli.main`), as `python -m patchkit` would
run it, for tests of what a command says and writes; a test of the process itself (its exit on a
signal, what reaches a pipe, stdin that is not a terminal) starts a real `python -m patchkit`.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Ran:
    """What a command gave, with the names of subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def patchkit_main(*args: str, cwd: Path | None = None, env: dict[str, str | None] | None = None) -> Ran:
    """`patchkit ARGS` through patchkit.cli.main in this process, in `cwd`, with `env` set (None: unset);
    argparse's exit is its exit status. The working folder and environment are restored after."""
    from patchkit.cli import main

    mp = pytest.MonkeyPatch()
    out, err = io.StringIO(), io.StringIO()
    try:
        for k, v in (env or {}).items():
            if v is None:
                mp.delenv(k, raising=False)
            else:
                mp.setenv(k, v)
        if cwd is not None:
            mp.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as e:  # argparse: a usage error (2) or --help (0)
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        mp.undo()
    return Ran(rc, out.getvalue(), err.getvalue())
