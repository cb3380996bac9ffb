"""The one error hierarchy. `cli.main()` catches `PatchkitError` once and prints its one line."""

from __future__ import annotations

from pathlib import Path


class PatchkitError(Exception):
    """Base of every error patchkit reports to the user as one line with a non-zero exit."""

    exit_code = 2


class RecipeError(PatchkitError):
    pass


class OptionError(PatchkitError):
    """A command-line option or PATCHKIT_* environment value that cannot be used."""


class FetchError(PatchkitError):
    pass


class ApplyError(PatchkitError):
    pass


class BuildError(PatchkitError):
    pass


class ParseError(PatchkitError):
    pass


class ResultsError(PatchkitError):
    pass


class ReportError(PatchkitError):
    pass


class LockError(PatchkitError):
    pass


class CommandError(PatchkitError):
    """A subprocess failed: names the command, its exit code and the log holding its output."""

    def __init__(self, argv: list[str], returncode: int | None, log: Path | None, detail: str = ""):
        self.argv = argv
        self.returncode = returncode
        self.log = log
        self.detail = detail
        what = "timed out" if returncode is None else f"exited with {returncode}"
        msg = f"command {argv[0]!r} {what}"
        if detail:
            msg += f": {detail}"
        if log:
            msg += f" (log: {log})"
        super().__init__(msg)


class ToolNotFound(PatchkitError):
    pass
