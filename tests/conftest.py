"""Helpers for every tier.

`patchkit_main` runs the command line in this process (`patchkit.cli.main`), as `python -m patchkit` would
run it, for tests of what a command says and writes; a test of the process itself (its exit on a
signal, what reaches a pipe, stdin that is not a terminal) starts a real `python -m patchkit`.
`script` imports one of the project's scripts/ (not a package) as a module.
`git` runs plain git for a test's own repositories (the one helper every tier uses).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# the default recipe's local test-only patches, in its series' order (recipes/default.toml): what the recipe,
# the recipe editor and a wheel's record are checked against
DEFAULT_LOCAL = (
    "perf-cases",
    "perf-min-time",
    "perf-fill-threads",
    "perf-fill-rows",
    "perf-phases",
    "perf-fill-fast",
    "perf-fill-chunks",
    "bench-depth-state",
)
# local patches the default recipe lists after those since 2026-12-06 (the build-only 0009 and the test-only 0011,
# after their GPU runs), or not (scripts/split_recipe.py without removes them): the tests pass either way
LISTABLE_LOCAL = ("fattn-split-hs256", "fattn-config-trace")


def default_local() -> tuple[str, ...]:
    """The default recipe's local patches as the tests expect them: DEFAULT_LOCAL, then those of LISTABLE_LOCAL that
    recipes/default.toml lists, in its order. What the recipe, the recipe editor and a wheel's record are checked
    against: another local patch, one of DEFAULT_LOCAL missing or a listable one before them still fail."""
    from patchkit.recipe import load_recipe

    recipe = load_recipe(str(Path(__file__).resolve().parents[1] / "recipes" / "default.toml"))
    listed = [p.key for p in recipe.series if p.local]
    return (*DEFAULT_LOCAL, *(k for k in listed if k in LISTABLE_LOCAL))


def script(name: str):
    """scripts/<name>.py as a module (registered under its name: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# a test's commits: a fixed author and committer (the user's may be unset), under the caller's own `env`
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
# `git(..., hermetic=True)`'s whole environment before the identity: no variable of this process's, no user or
# system git config
GIT_HERMETIC = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, hermetic: bool = False, strip: bool = True) -> str:
    """`git ARGS` in `cwd`, its stdout (stripped unless `strip` is false: a patch's text keeps its last lines);
    an exit other than 0 fails the test with git's stderr. Plain git, not patchkit's `vcs`: what makes a
    test's repository is not the code under test. The environment: this process's (`GIT_HERMETIC` alone if
    `hermetic`), then `GIT_IDENTITY`, then `env`."""
    full = {**(GIT_HERMETIC if hermetic else os.environ), **GIT_IDENTITY, **(env or {})}
    r = subprocess.run(["git", *args], cwd=cwd, env=full, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} in {cwd} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout.strip() if strip else r.stdout


def commit_files(repo: Path, files: dict[str, str | None], message: str, *, hermetic: bool = False) -> str:
    """A commit of `files` (path -> text, None: removed) on the repository `repo` (made, `git init`, where it has
    none; the folders a path needs too), every change of its tree added; its sha."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "-q", hermetic=hermetic)
    for rel, text in files.items():
        if text is None:
            (repo / rel).unlink()
        else:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
    git(repo, "add", "-A", hermetic=hermetic)
    git(repo, "commit", "-qm", message, hermetic=hermetic)
    return git(repo, "rev-parse", "HEAD", hermetic=hermetic)


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


# --- the CPU seconds of each test (CI's budget is the 2 cores' time, and wall time under load says little) ---
_cpu: dict[str, tuple[float, float]] = {}


def _cpu_now() -> float:
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's CPU seconds (setup, call and teardown; pytest's and the processes it started and waited
    for) beside its wall seconds, for the summary below."""
    import time

    c0, w0 = _cpu_now(), time.monotonic()
    yield
    _cpu[item.nodeid] = (_cpu_now() - c0, time.monotonic() - w0)


def pytest_terminal_summary(terminalreporter):
    """The tests that used the most CPU seconds, and the session's CPU seconds against its wall seconds: on 2
    cores a tier's wall time is at least half its CPU time, whatever else the machine runs."""
    if not _cpu:
        return
    tr = terminalreporter
    tr.section("most CPU seconds (setup + call + teardown, with the processes each test waited for)")
    for nodeid, (cpu, wall) in sorted(_cpu.items(), key=lambda kv: -kv[1][0])[:12]:
        tr.write_line(f"{cpu:8.1f} s CPU {wall:8.1f} s wall  {nodeid}")
    cpu, wall = sum(c for c, _ in _cpu.values()), sum(w for _, w in _cpu.values())
    tr.write_line(f"{cpu:8.1f} s CPU {wall:8.1f} s wall  all {len(_cpu)} tests")
