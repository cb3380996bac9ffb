"""The single subprocess helper: argv lists only, command echoed, output saved to a log, errors raised.

Children die with patchkit: they stay in patchkit's process group (a kill of the group, e.g. kill -9
-PGID or a terminal's Ctrl-C, reaches them and whatever they started), and on Linux each child also
gets SIGKILL when the patchkit thread that started it dies (PR_SET_PDEATHSIG), e.g. on kill -9 of
patchkit alone. On a timeout, the child and every process under it are killed.
"""

from __future__ import annotations

import contextlib
import ctypes
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


_PR_SET_PDEATHSIG = 1
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None) if sys.platform.startswith("linux") else None


def _die_with_parent(parent: int, nice: int = 0) -> Callable[[], None] | None:
    """A preexec_fn (Linux): SIGKILL this child when its parent thread dies; exit at once if the
    parent is already gone (it died between fork and here). `nice`: the child's niceness increment."""
    if _prctl is None:
        return (lambda: os.nice(nice) and None) if nice else None

    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(137)
        if nice:
            os.nice(nice)

    return preexec


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (ppid is the 4th field of /proc/PID/stat)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            kids.setdefault(int(fields[1]), []).append(int(d))
    return kids


def _tree(pid: int) -> list[int]:
    """`pid` and every process under it, parents before their children (from /proc)."""
    tree, todo = [], [pid]
    kids = _children() if os.path.isdir("/proc") else {}
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(kids.get(p, []))
    return tree


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal `pid` and every process under it (children first found, then the parent: an orphan
    would be re-parented to init and escape)."""
    for p in reversed(_tree(pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


def stop_tree(pid: int) -> None:
    """SIGSTOP `pid` and every process under it, the parent first (a stopped process starts no child);
    the tree is listed twice, for a child started between the first listing and its parent's stop."""
    for _ in range(2):
        for p in _tree(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGSTOP)


# Held processes: the CPU lane's steps (compile checks) are stopped while a step that times kernels
# runs, so that no compile shares the machine with a timing (patchkit.pipeline). A thread says which
# group its processes belong to (`group`); `held(group)` stops the running ones and makes new ones
# wait, until it ends.
_local = threading.local()
_hold = threading.Condition()


@dataclass
class Hold:
    """What a hold did: processes it stopped, processes it kept from starting."""

    stopped: int = 0
    kept: int = 0


_held: dict[str, Hold] = {}
_running: dict[int, str] = {}  # pid -> group


@contextlib.contextmanager
def group(name: str, nice: int = 0):
    """Processes this thread starts inside belong to `name` (and run `nice`r: a lower CPU priority)."""
    old, old_nice = getattr(_local, "group", ""), getattr(_local, "nice", 0)
    _local.group, _local.nice = name, nice
    try:
        yield
    finally:
        _local.group, _local.nice = old, old_nice


def current_group() -> tuple[str, int]:
    """(group, nice) of this thread: for a worker thread that starts processes on its behalf."""
    return getattr(_local, "group", ""), getattr(_local, "nice", 0)


@contextlib.contextmanager
def held(name: str):
    """Stop the running processes of group `name` (and their children) and hold new ones back; all
    go on at the end. Yields a Hold that counts them."""
    h = Hold()
    with _hold:
        _held[name] = h
        for p, g in list(_running.items()):
            if g == name:
                stop_tree(p)
                h.stopped += 1
    try:
        yield h
    finally:
        with _hold:
            _held.pop(name, None)
            for p, g in list(_running.items()):
                if g == name:
                    kill_tree(p, signal.SIGCONT)
            _hold.notify_all()


def _started(pid: int) -> None:
    name = getattr(_local, "group", "")
    if not name:
        return
    with _hold:
        _running[pid] = name
        if name in _held:  # held between the wait and the start
            stop_tree(pid)
            _held[name].stopped += 1


def _ended(pid: int) -> None:
    with _hold:
        _running.pop(pid, None)


def _wait_if_held() -> None:
    name = getattr(_local, "group", "")
    if name:
        with _hold:
            if name in _held:
                _held[name].kept += 1
                _hold.wait_for(lambda: name not in _held)


def _wait(p: subprocess.Popen, timeout: float | None) -> int | None:
    """The child's exit status; None when it ran past `timeout` (it and its descendants are killed).
    On Ctrl-C the child's tree gets SIGTERM and is waited for."""
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(p.pid, signal.SIGKILL)
        p.wait()
        return None
    except KeyboardInterrupt:
        kill_tree(p.pid, signal.SIGTERM)
        p.wait()
        raise


def stderr_log(log: Path) -> Path:
    """Where a tool's stderr is kept when it is kept apart from its stdout: raw/x.log -> raw/x.stderr.log."""
    return log.with_name(log.name.removesuffix(".log") + ".stderr.log")


def read_both(log: Path) -> str:
    """A log's text followed by its stderr log's, if the streams were kept apart (older logs hold both)."""
    text = log.read_text(encoding="utf-8", errors="replace")
    err = stderr_log(log)
    return text + (err.read_text(encoding="utf-8", errors="replace") if err.is_file() else "")


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

    Output is shown only on failure (last lines) unless `stream`. With `separate_stderr`, the streams
    are kept apart: `log` gets stdout alone and `stderr_log(log)` beside it gets stderr, and
    `Completed.stdout` holds stdout alone (what the parsers read). With
    `check`, a non-zero exit or a timeout raises CommandError naming the program, the exit code and
    the log. With `check=False` the caller gets the Completed and decides (used where a failing tool
    is a result, e.g. a test run).
    """
    args = [str(a) for a in argv]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    args[0] = which(args[0], full_env)
    cmdline = quote(args)
    if echo:
        sys.stderr.write(f"+ {cmdline}\n")  # one write: lines of commands started at once do not mix
        sys.stderr.flush()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    _wait_if_held()
    start = time.monotonic()
    out_chunks: list[str] = []
    err_tail: list[str] = []
    err_path = stderr_log(log) if (log is not None and separate_stderr) else None
    with (
        open(log, "w", encoding="utf-8") if log is not None else contextlib.nullcontext() as logf,
        open(err_path, "w", encoding="utf-8") if err_path is not None else contextlib.nullcontext() as errf,
    ):
        if logf:
            logf.write(f"$ {cmdline}\n" + (f"# cwd: {cwd}\n" if cwd else ""))
            logf.flush()
        lock = threading.Lock()
        ends_line = [True]  # whether the log's last write ended a line (the exit line starts a new one)

        def pump(stream_in, keep: bool = True) -> None:
            for line in stream_in:
                if keep:
                    out_chunks.append(line)
                elif errf is not None:
                    errf.write(line)
                    err_tail[:] = [*err_tail[-19:], line]
                    continue
                else:
                    err_tail[:] = [*err_tail[-19:], line]
                with lock:
                    if logf and keep:
                        logf.write(line)
                        ends_line[0] = line.endswith("\n")
                if not keep:
                    continue
                if stream:
                    sys.stderr.write(line)
                if on_line is not None:
                    on_line(line)

        with subprocess.Popen(
            args,
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            preexec_fn=_die_with_parent(os.getpid(), getattr(_local, "nice", 0)),
        ) as p:
            readers = [threading.Thread(target=pump, args=(p.stdout,), daemon=True)]
            if separate_stderr:
                readers.append(threading.Thread(target=pump, args=(p.stderr, False), daemon=True))
            for reader in readers:
                reader.start()
            _started(p.pid)
            try:
                returncode = _wait(p, timeout)
            finally:
                _ended(p.pid)
            for reader in readers:
                reader.join(timeout=10)
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
            tail = "".join(out_chunks[-20:] + err_tail)
            if tail:
                sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")
        raise CommandError(args, returncode, log)
    return done
