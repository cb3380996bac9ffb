"""The one way patchkit runs git: through GitPython, from this module only.

`git()` runs one git command and returns its exit status and the bytes of its output as they are;
`check=True` raises our error naming the command and git's last line. `repo()` and `init_bare()` give a
`Repo`, a repository's folder to run git commands in (`run`: stdout or `GitError`; `attempt`: exit
status, stdout and stderr). No other module imports GitPython or starts `git` itself.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git as _gitpython

from patchkit.errors import ApplyError

# the same commits from the same inputs everywhere: no user config, a fixed committer (authors: the patches)
NEUTRAL_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
IDENTITY_ENV = {
    "GIT_COMMITTER_NAME": "patchkit",
    "GIT_COMMITTER_EMAIL": "patchkit@localhost",
}

GitError = _gitpython.GitCommandError


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        """stdout as text, stripped (what most callers want)."""
        return self.stdout.decode("utf-8", "replace").strip()

    @property
    def output(self) -> str:
        """stdout and stderr as text, for messages."""
        return self.stdout.decode("utf-8", "replace") + self.stderr.decode("utf-8", "replace")


def git(
    cwd: Path | str,
    *args: str,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    check: bool = False,
    neutral: bool = True,
) -> GitResult:
    """`git ARGS` in `cwd`; with `neutral`, the user's git config is not read and the identity is fixed."""
    full = {**os.environ, **(NEUTRAL_ENV if neutral else {}), **IDENTITY_ENV, **(env or {})}
    with tempfile.TemporaryFile() as stdin:
        if input is not None:
            stdin.write(input)
            stdin.seek(0)
        status, out, err = _gitpython.Git(str(cwd)).execute(
            ["git", *args],
            env=full,
            istream=stdin if input is not None else None,
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
        )
    result = GitResult(
        returncode=status, stdout=out or b"", stderr=err.encode() if isinstance(err, str) else (err or b"")
    )
    if check and not result.ok:
        last = result.output.strip().splitlines()[-1:] or ["failed"]
        raise ApplyError(f"git {' '.join(args[:3])} in {cwd}: {last[0]}")
    return result


def show(cwd: Path | str, commit: str, path: str, *, git_dir: Path | str | None = None) -> str | None:
    """A file's text at a commit (`git show COMMIT:PATH`), or None where it is not there."""
    r = git(cwd, *([f"--git-dir={git_dir}"] if git_dir else []), "show", f"{commit}:{path}")
    return r.stdout.decode("utf-8", "replace") if r.ok else None


class Repo:
    """A repository git runs in: a worktree, or a bare repository (its commands get GIT_DIR, so that
    one with worktrees that have their own config is still taken as bare). GitPython's semantics: the
    user's git config is read, stdout comes back as text with one trailing newline dropped."""

    def __init__(self, path: Path | str, *, bare: bool = False) -> None:
        # as GitPython's Repo(path): never a parent folder's repository (git would search upwards)
        if not Path(path).is_dir():
            raise _gitpython.NoSuchPathError(str(path))
        if not (Path(path) / ("HEAD" if bare else ".git")).exists():
            raise _gitpython.InvalidGitRepositoryError(str(path))
        self.working_dir = Path(path)
        self.git_dir = Path(path) if bare else None
        self._env = {"GIT_DIR": str(path)} if bare else {}
        self._git = _gitpython.Git(str(path))

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        """`git ARGS`: its stdout; `GitError` (the command, its status, stdout and stderr) where it fails."""
        return self._git.execute(["git", *args], env={**self._env, **(env or {})})

    def attempt(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """`git ARGS` that may fail: (exit status, stdout, stderr)."""
        return self._git.execute(
            ["git", *args], env={**self._env, **(env or {})}, with_extended_output=True, with_exceptions=False
        )


def repo(path: Path | str, *, bare: bool = False) -> Repo:
    """The repository (a worktree, or with `bare` a bare repository) at `path`."""
    return Repo(path, bare=bare)


def init_bare(path: Path | str) -> Repo:
    """`git init --bare` at `path` (made where missing)."""
    Path(path).mkdir(parents=True, exist_ok=True)
    _gitpython.Git(str(path)).execute(["git", "init", "--bare"])
    return Repo(path, bare=True)
