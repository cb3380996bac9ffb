"""The one way patchkit runs git: through GitPython, from this module only.

`git()` runs one git command and returns its exit status and the bytes of its output as they are;
`check=True` raises our error naming the command and git's last line. `repo()` opens a repository for
the object API (worktrees, refs). No other module imports GitPython or starts `git` itself.
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
Repo = _gitpython.Repo


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


def repo(path: Path | str, *, init_bare: bool = False) -> Repo:
    """A GitPython repository object (bare-initialised first when asked and missing)."""
    if init_bare and not Path(path).exists():
        return _gitpython.Repo.init(str(path), bare=True)
    return _gitpython.Repo(str(path))
