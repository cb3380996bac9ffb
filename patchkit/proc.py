"""The single subprocess helper: argv lists only, command echoed, output saved to a log, errors raised.

Children die with patchkit, held or not: each program leads a session of its own, and a watchdog
process (a session of its own too) kills every process of those sessions when patchkit dies, by any
signal, `kill -9` of its process group included (see `_sessions` below). On SIGINT/SIGTERM/SIGHUP
(`stop_on_signals`, the CLI) or `interrupt()`, every program is stopped within seconds and `run`
raises `Interrupted` in every thread. On a timeout, the program's session is killed.
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


class Interrupted(KeyboardInterrupt):
    """patchkit was told to stop (SIGINT, SIGTERM, SIGHUP): raised by `run` in every thread that runs or
    starts a program once `interrupt()` was called; the step in flight is recorded as interrupted."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM (the shell's convention)

    def __str__(self) -> str:
        return f"interrupted ({signal.Signals(self.signum).name})"


# --- sessions. Every program patchkit runs leads a session of its own (setsid), and every process it
# starts stays in that session: Ninja puts each compile in a process group of its own (so a kill of
# patchkit's group never reached nvcc/cicc/ptxas), but not in a session of its own. A session is
# signalled group by group (each group at once, so a process started meanwhile is in it), and found in
# /proc. A watchdog process in a session of its own reads a pipe whose write end only patchkit holds:
# when patchkit dies, by any signal, kill -9 included, it reads EOF and kills (SIGCONT, SIGKILL) every
# process of the sessions patchkit had not seen end. PR_SET_PDEATHSIG alone would not do: it reaches
# only the direct child, not Ninja's compiles, and a held (SIGSTOPped) process waits for SIGCONT.
def _sessions(sids: set[int]) -> list[tuple[int, int]]:
    """(pid, process group) of every process in the sessions `sids` (from /proc)."""
    out = []
    for d in os.listdir("/proc") if sids else ():
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state ppid pgrp session ...
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) in sids:
            out.append((int(d), int(fields[2])))
    return out


def _signal(pid: int, sig: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, sig)


def signal_session(sid: int, sig: int) -> None:
    """Send `sig` to every process group of session `sid`: its leader's first (a held Ninja starts no
    compile), then each group found in /proc, twice (for a group started between)."""
    _signal(sid, sig, group=True)
    for _ in range(2):
        for pgrp in {g for _, g in _sessions({sid})}:
            _signal(pgrp, sig, group=True)


def kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (SIGCONT too: nothing stays stopped), until none is left."""
    for _ in range(100):
        left = _sessions({sid})
        if not left:
            return
        for pid, pgrp in left:
            _signal(pgrp, signal.SIGKILL, group=True)
            _signal(pid, signal.SIGCONT)
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)


_WATCHDOG = r"""
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
sids, buf = set(), b""
while True:
    chunk = os.read(0, 4096)
    if not chunk:
        break
    *lines, buf = (buf + chunk).split(b"\n")
    for ln in lines:
        n = int(ln)
        (sids.add if n > 0 else sids.discard)(abs(n))
def left():
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                st = f.read()
        except (OSError, ValueError):
            continue
        x = st[st.rfind(b")") + 2 :].split()
        if d.isdigit() and len(x) > 3 and x[0] != b"Z" and int(x[3]) in sids:
            out.append(int(d))
    return out
for _ in range(200):
    pids = left() if sids else []
    if not pids:
        break
    for p in pids:
        for s in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(p, s)
            except OSError:
                pass
    time.sleep(0.02)
"""
_dog_lock = threading.Lock()
_dog: list = []  # [owner pid, Popen, write fd] of this process's watchdog


def _watchdog_fd() -> int:
    """The write end of this process's watchdog pipe (started on first use, again after a fork or if
    it died); -1 where there is no /proc."""
    if not os.path.isdir("/proc"):
        return -1
    with _dog_lock:
        if _dog and _dog[0] == os.getpid() and _dog[1].poll() is None:
            return _dog[2]
        r, w = os.pipe()  # both close on exec: no program patchkit runs holds the write end
        dog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # a kill of patchkit's process group does not reach it
        )
        os.close(r)
        if _dog and _dog[0] == os.getpid():
            with contextlib.suppress(OSError):
                os.close(_dog[2])
        _dog[:] = [os.getpid(), dog, w]
        for pid in list(_running):  # sessions started before a watchdog died
            _write(w, pid)
        return w


def _write(fd: int, n: int) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, f"{n}\n".encode())


def _preexec(parent: int, dog: int, nice: int = 0) -> Callable[[], None]:
    """A preexec_fn: (in the child, after setsid) tell the watchdog of this session before anything
    runs in it, SIGKILL this child when its parent thread dies (Linux), exit at once if the parent is
    already gone (it died between fork and here); `nice`: the child's niceness increment."""

    def preexec() -> None:
        if dog >= 0:
            _write(dog, os.getpid())
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(137)
        if nice:
            os.nice(nice)

    return preexec


# Held processes: the CPU lane's steps (compile checks) are stopped while a step that times kernels
# runs, so that no compile shares the machine with a timing (patchkit.run.pipeline). A thread says which
# group its processes belong to (`group`); `held(group)` stops the running ones and makes new ones
# wait, until it ends.
_local = threading.local()
_hold = threading.Condition()


@dataclass
class Hold:
    """What a hold did: processes it stopped, processes it kept from starting."""

    stopped: int = 0
    kept: int = 0
    finished: int = 0  # processes that may not be stopped midway (`unstoppable`): waited for until they ended


_held: dict[str, Hold] = {}
_running: dict[int, str] = {}  # session (the program's pid) -> group ('' for none)
_unstoppable: set[int] = set()  # sessions a hold waits for instead of stopping them (`unstoppable`)
_interrupt: list[int] = []  # the signal that stopped this process's runs, once interrupt() was called


@contextlib.contextmanager
def group(name: str, nice: int = 0):
    """Processes this thread starts inside belong to `name` (and run `nice`r: a lower CPU priority)."""
    old, old_nice = getattr(_local, "group", ""), getattr(_local, "nice", 0)
    _local.group, _local.nice = name, nice
    try:
        yield
    finally:
        _local.group, _local.nice = old, old_nice


@contextlib.contextmanager
def unstoppable():
    """Processes this thread starts inside are never stopped by a hold: the hold waits until they end (new
    ones are still kept from starting). For a profiler (ncu) stopped in the middle of its replay: another
    ncu started by the holder then waited for it for ever (examples/h200-partial-2026-12-05/warm)."""
    old = getattr(_local, "unstoppable", False)
    _local.unstoppable = True
    try:
        yield
    finally:
        _local.unstoppable = old


def current_group() -> tuple[str, int]:
    """(group, nice) of this thread: for a worker thread that starts processes on its behalf."""
    return getattr(_local, "group", ""), getattr(_local, "nice", 0)


@contextlib.contextmanager
def held(name: str):
    """Stop the running processes of group `name` (their whole sessions) and hold new ones back; all
    go on at the end. Yields a Hold that counts them."""
    h = Hold()
    with _hold:
        _held[name] = h
        for p, g in list(_running.items()):
            if g == name and p not in _unstoppable:
                signal_session(p, signal.SIGSTOP)
                h.stopped += 1

        def busy() -> set[int]:
            return {p for p, g in _running.items() if g == name and p in _unstoppable}

        h.finished = len(busy())
        _hold.wait_for(lambda: not busy() or bool(_interrupt))
    try:
        yield h
    finally:
        with _hold:
            _held.pop(name, None)
            for p, g in list(_running.items()):
                if g == name:
                    signal_session(p, signal.SIGCONT)
            _hold.notify_all()


def interrupted() -> int:
    """The signal interrupt() was called with (0: not interrupted)."""
    return _interrupt[0] if _interrupt else 0


def interrupt(signum: int = signal.SIGINT, grace: float = 2.0) -> None:
    """Stop every program this process runs, held or not: SIGTERM and SIGCONT to each session, SIGKILL
    to what is left after `grace` seconds (at once when called again); from now on `run` raises
    Interrupted in every thread. Safe in a signal handler (the work is done on a thread of its own)."""
    first = not _interrupt
    if first:
        _interrupt.append(signum)
    sids = list(_running)
    threading.Thread(target=_stop_all, args=(sids, grace if first else 0.0), daemon=True).start()


def _stop_all(sids: list[int], grace: float) -> None:
    for sid in sids:
        signal_session(sid, signal.SIGTERM)
        signal_session(sid, signal.SIGCONT)
    with _hold:
        _hold.notify_all()  # threads waiting for a hold to end stop waiting
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _sessions(set(sids)):
        time.sleep(0.05)
    for sid in {*sids, *_running}:
        kill_session(sid)


@contextlib.contextmanager
def stop_on_signals():
    """(Main thread.) SIGINT, SIGTERM and SIGHUP call interrupt() and raise Interrupted in the main
    thread; a second signal only kills what is left at once (the first one's cleanup goes on)."""

    def handler(signum, frame) -> None:
        first = not _interrupt
        interrupt(signum)
        if first:
            raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def check_interrupt() -> None:
    """Raise Interrupted once interrupt() was called."""
    if _interrupt:
        raise Interrupted(_interrupt[0])


def _started(pid: int) -> None:
    name = getattr(_local, "group", "")
    with _hold:
        _running[pid] = name
        if getattr(_local, "unstoppable", False):
            _unstoppable.add(pid)
        if name and name in _held:  # held between the wait and the start (it has not begun its work yet)
            signal_session(pid, signal.SIGSTOP)
            _held[name].stopped += 1
    if _dog and _dog[0] == os.getpid():
        _write(_dog[2], pid)  # the child told it already (preexec); again for a watchdog started since


def _ended(pid: int) -> None:
    with _hold:
        _running.pop(pid, None)
        _unstoppable.discard(pid)
        _hold.notify_all()  # a hold waiting for an unstoppable process
    if _dog and _dog[0] == os.getpid():
        _write(_dog[2], -pid)


def _wait_if_held() -> None:
    name = getattr(_local, "group", "")
    if name:
        with _hold:
            if name in _held:
                _held[name].kept += 1
                _hold.wait_for(lambda: name not in _held or _interrupt)
    check_interrupt()


def _wait(p: subprocess.Popen, timeout: float | None, stop: threading.Event | None = None) -> int | None:
    """The child's exit status; None when it ran past `timeout` (its session is killed). On Ctrl-C
    (KeyboardInterrupt in the main thread without stop_on_signals) every program is stopped
    (interrupt()) and the child waited for. When `stop` is set, the child is ended (SIGTERM, then its
    session killed) and its status returned: a sampler that runs until told (`sampling`)."""
    try:
        if stop is not None:
            return _wait_stop(p, timeout, stop)
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        p.wait()
        return None
    except KeyboardInterrupt as e:
        if not _interrupt:
            interrupt(getattr(e, "signum", signal.SIGINT))
        p.wait()
        raise


def _wait_stop(p: subprocess.Popen, timeout: float | None, stop: threading.Event) -> int | None:
    end = None if timeout is None else time.monotonic() + timeout
    while not stop.wait(0.05):
        if p.poll() is not None:
            return p.returncode
        if end is not None and time.monotonic() > end:
            raise subprocess.TimeoutExpired(p.args, timeout or 0)
    signal_session(p.pid, signal.SIGTERM)
    try:
        return p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        return p.wait()


@contextlib.contextmanager
def sampling(argv: list[str | os.PathLike], *, log: Path, timeout: float | None = None):
    """Run a sampler (e.g. `nvidia-smi ... -lms 100`) in the background for the block's time, logged like
    any program; ended (SIGTERM) when the block ends. Yields a list that then holds its Completed (or the
    error that kept it from running: ToolNotFound)."""
    stop, out = threading.Event(), []

    def go() -> None:
        try:
            out.append(run(argv, log=log, timeout=timeout, check=False, stop=stop))
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join(timeout=30)


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


class _Output:
    """Where a program's output goes (`run` starts and waits): the log (the command line, then stdout, or both
    streams, then the exit line), stderr in `stderr_log(log)` with `separate`, stdout kept for the Completed,
    the last stderr lines for a failure's message, each stdout line echoed with `stream` and given to `on_line`."""

    def __init__(self, log: Path | None, separate: bool, stream: bool, on_line: Callable[[str], None] | None):
        self.log, self.separate, self.stream, self.on_line = log, separate, stream, on_line
        self.err_path = stderr_log(log) if (log is not None and separate) else None
        self.chunks: list[str] = []  # stdout's lines (both streams' unless `separate`)
        self.err_tail: list[str] = []  # stderr's last 20 lines, with `separate`
        self.ends_line = True  # whether the log's last write ended a line (the exit line starts a new one)
        self._logf = self._errf = None  # one thread writes each

    @contextlib.contextmanager
    def opened(self, cmdline: str, cwd: Path | None):
        """The log (and stderr's) open for writing, the command line (and folder) at its top."""
        with contextlib.ExitStack() as files:
            if self.log is not None:
                self._logf = files.enter_context(open(self.log, "w", encoding="utf-8"))
            if self.err_path is not None:
                self._errf = files.enter_context(open(self.err_path, "w", encoding="utf-8"))
            if self._logf:
                self._logf.write(f"$ {cmdline}\n" + (f"# cwd: {cwd}\n" if cwd else ""))
                self._logf.flush()
            yield self

    def pump_out(self, stream_in) -> None:
        for line in stream_in:
            self.chunks.append(line)
            if self._logf:
                self._logf.write(line)
                self.ends_line = line.endswith("\n")
            if self.stream:
                sys.stderr.write(line)
            if self.on_line is not None:
                self.on_line(line)

    def pump_err(self, stream_in) -> None:
        for line in stream_in:
            if self._errf is not None:
                self._errf.write(line)
            self.err_tail[:] = [*self.err_tail[-19:], line]

    def finish(self, returncode: int | None, seconds: float) -> None:
        """The log's last line, once the files are closed: `# exit: N, S s` (N: `timeout` past the timeout)."""
        if self.log is not None:
            status = returncode if returncode is not None else "timeout"
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(("" if self.ends_line else "\n") + f"# exit: {status}, {seconds:.1f} s\n")

    def show_tail(self) -> None:
        """A failure's last lines of output on stderr."""
        tail = "".join(self.chunks[-20:] + self.err_tail)
        if tail:
            sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")


def _start_and_wait(
    args: list[str],
    cwd: Path | None,
    env: dict[str, str],
    output: _Output,
    timeout: float | None,
    stop: threading.Event | None,
) -> int | None:
    """Start the program in a session of its own (its pipes read by `output`), register it (`_started`: a hold
    taken since the caller's `_wait_if_held` stops it), wait for it (`_wait`), unregister it (`_ended`), and
    give its exit status (None: it ran past `timeout`). This order is what holds, signals and kills rely on."""
    with subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if output.separate else subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,  # its processes, Ninja's compiles included, are found by session
        preexec_fn=_preexec(os.getpid(), _watchdog_fd(), getattr(_local, "nice", 0)),
    ) as p:
        readers = [threading.Thread(target=output.pump_out, args=(p.stdout,), daemon=True)]
        if output.separate:
            readers.append(threading.Thread(target=output.pump_err, args=(p.stderr,), daemon=True))
        for reader in readers:
            reader.start()
        _started(p.pid)
        try:
            returncode = _wait(p, timeout, stop)
        finally:
            _ended(p.pid)
        for reader in readers:
            reader.join(timeout=10)
    return returncode


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
    stop: threading.Event | None = None,
) -> Completed:
    """Run `argv` (no shell). stdout+stderr go to `log` (with the command line as its first line).

    Output is shown only on failure (last lines) unless `stream`. With `separate_stderr`, the streams
    are kept apart: `log` gets stdout alone and `stderr_log(log)` beside it gets stderr, and
    `Completed.stdout` holds stdout alone (what the parsers read). With
    `check`, a non-zero exit or a timeout raises CommandError naming the program, the exit code and
    the log. With `check=False` the caller gets the Completed and decides (used where a failing tool
    is a result, e.g. a test run). With `stop`, the program runs until it ends or `stop` is set
    (`sampling`).
    """
    args = [str(a) for a in argv]
    full_env = {**os.environ, **(env or {})}
    args[0] = which(args[0], full_env)
    cmdline = quote(args)
    if echo:
        sys.stderr.write(f"+ {cmdline}\n")  # one write: lines of commands started at once do not mix
        sys.stderr.flush()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    _wait_if_held()
    start = time.monotonic()
    output = _Output(log, separate_stderr, stream, on_line)
    with output.opened(cmdline, cwd):
        returncode = _start_and_wait(args, cwd, full_env, output, timeout, stop)
    seconds = time.monotonic() - start
    output.finish(returncode, seconds)
    check_interrupt()  # a program that ended on or after an interrupt proves nothing: never a result
    done = Completed(argv=args, returncode=returncode, seconds=seconds, log=log, stdout="".join(output.chunks))
    if check and not done.ok:
        if not stream:
            output.show_tail()
        raise CommandError(args, returncode, log)
    return done
