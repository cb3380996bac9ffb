"""The single subprocess helper: argv lists only, command echoed, output saved to a log, errors raised."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import CommandError, ToolNotFound


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: list[str]
    returncode: int | None  # None: killed on timeout
    seconds: float
    log: Path | None
    stdout: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def which(program: str, env: dict[str, str] | None = None) -> str:
    if os.sep in program:
        if not os.access(program, os.X_OK):
            raise ToolNotFound(f"{program}: not found or not executable")
        return program
    path = shutil.which(program, path=(env or os.environ).get("PATH"))
    if path is None:
        raise ToolNotFound(f"{program}: not found on PATH")
    return path


def quote(argv: list[str]) -> str:
    return shlex.join(str(a) for a in argv)


def run(
    argv: list[str | os.PathLike],
    *,
    log: Path | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    echo: bool = True,
    stream: bool = False,
    on_line: Callable[[str], None] | None = None,
    separate_stderr: bool = False,
) -> Completed:
    """Run `argv` (no shell). stdout+stderr go to `log` (with the command line as its first line).

    Output is shown only on failure (last lines) unless `stream`. With `separate_stderr`, the log
    still gets both streams but `Completed.stdout` holds stdout alone (e.g. generated text). With `check`, a non-zero exit or a
    timeout raises CommandError naming the program, the exit code and the log. With `check=False` the
    caller gets the Completed and decides (used where a failing tool is a result, e.g. a test run).
    """
    args = [str(a) for a in argv]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    args[0] = which(args[0], full_env)
    cmdline = quote(args)
    if echo:
        print(f"+ {cmdline}", file=sys.stderr, flush=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    out_chunks: list[str] = []
    returncode: int | None
    logf = open(log, "w", encoding="utf-8") if log is not None else None
    if logf:
        logf.write(f"$ {cmdline}\n" + (f"# cwd: {cwd}\n" if cwd else ""))
        logf.flush()

    lock = threading.Lock()
    ends_line = [True]  # whether the log's last write ended a line (the exit line starts a new one)

    def pump(stream_in, keep: bool = True) -> None:
        for line in stream_in:
            if keep:
                out_chunks.append(line)
            with lock:
                if logf:
                    logf.write(line)
                    ends_line[0] = line.endswith("\n")
            if not keep:
                continue
            if stream:
                sys.stderr.write(line)
            if on_line is not None:
                on_line(line)

    try:
        with subprocess.Popen(
            args,
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        ) as p:
            readers = [threading.Thread(target=pump, args=(p.stdout,), daemon=True)]
            if separate_stderr:
                readers.append(threading.Thread(target=pump, args=(p.stderr, False), daemon=True))
            for reader in readers:
                reader.start()
            try:
                returncode = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                returncode = None
            except KeyboardInterrupt:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait()
                raise
            for reader in readers:
                reader.join(timeout=10)
    finally:
        if logf:
            logf.close()
    seconds = time.monotonic() - start
    if log is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write(
                ("" if ends_line[0] else "\n")
                + f"# exit: {returncode if returncode is not None else 'timeout'}, {seconds:.1f} s\n"
            )
    out = "".join(out_chunks)
    done = Completed(argv=args, returncode=returncode, seconds=seconds, log=log, stdout=out)
    if check and not done.ok:
        if not stream:
            tail = "".join(out_chunks[-20:])
            if tail:
                sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")
        raise CommandError(args, returncode, log)
    return done
