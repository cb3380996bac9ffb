"""Ninja runs of a build: the command, its [N/M] lines as a progress bar, a failure's first compiler error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from patchkit import proc
from patchkit.errors import BuildError, CommandError
from patchkit.parsers.compiler import first_compiler_error
from patchkit.progress import Progress

if TYPE_CHECKING:
    from patchkit.build.tools import Toolchain


class _Jobs(Protocol):  # patchkit.build.BuildOptions, as far as a Ninja run reads it
    jobs: int


class _Progress:
    """Ninja's [N/M] lines as a progress bar (patchkit.progress), made at the first such line so that
    it never shares a line with the echoed command."""

    _RE = re.compile(r"^\[(\d+)/(\d+)\]")

    def __init__(self, desc: str):
        self.desc = desc
        self.bar: Progress | None = None
        self.steps = 0

    def __call__(self, line: str) -> None:
        m = self._RE.match(line)
        if not m:
            return
        done, total = int(m.group(1)), int(m.group(2))
        if self.bar is None:  # Ninja's first total is not its last (a CMake re-run is [1/1]): no count said here
            self.bar = Progress(self.desc, total=total, unit="step", what="Ninja", count="steps counted as they run")
        self.bar.set_total(total)
        self.bar.update(done - self.steps)
        self.steps = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_ninja(
    bdir: Path, targets: list[str], opts: _Jobs, tc: Toolchain, log: Path, desc: str, keep_going: bool = False
) -> proc.Completed:
    args = ["ninja", "-C", str(bdir)]
    if opts.jobs:
        args += ["-j", str(opts.jobs)]
    if keep_going:
        args += ["-k", "0"]
    progress = _Progress(desc)
    try:
        return proc.run([*args, *targets], log=log, env=tc.env, on_line=progress, check=not keep_going)
    except CommandError:
        err = first_compiler_error(log.read_text(errors="replace")) if log.is_file() else None
        raise BuildError(f"{desc}: build failed: {err or 'see log'} (log: {log})") from None
    finally:
        progress.close()
