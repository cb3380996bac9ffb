"""The work folder: where patchkit keeps its cache, variant trees, builds and runs, and its locks.

<work>/                      --work, or $PATCHKIT_WORK, or the nearest .patchkit from here up (`project_work_folder`)
  workspace.json             the folder's absolute path when patchkit first wrote to it: git worktree
                             links and CMake caches hold absolute paths, so a moved or copied work
                             folder is refused (Workspace.at) instead of driving the original's trees
  cache/sdist/<file>         downloaded sdists (re-verified against the recipe's sha256 on every use)
  cache/sdist-project/       each sdist without .git and its vendored llama.cpp (+ .json record:
                             the sdist sha256 it was cut from, its own sha256): what `wheel` needs
  cache/llama.cpp.git        one bare git repo holding every base (refs/patchkit/bases/*)
  cache/bases/<key>.json     what each base ref is (route, commit, upstream, how it was verified)
  variants/<recipe>/<name>   one git worktree per variant (branch pk/<recipe>/<name>)
  builds/<recipe>/<config>/  tree/ (the one worktree that is rebuilt incrementally), build/ (CMake),
                             bin/<variant>/ (snapshots of finished builds, keyed; see build.py)
  runs/<recipe>/<id>/        results bundles (env.json, raw/, results.json, .lock)
  locks/                     one lock file per folder being written (a build root: or read, shared)
(and, outside it, nothing: the machine-wide timing lock is an abstract unix socket, see `machine_lock`)

Every name that becomes a path component here (recipe, variant, config, run id, label) goes through
`safe_component`; `refuse_own_state` keeps an output file (-o) from overwriting what patchkit owns.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import re
import socket
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchkit import option_set, proc
from patchkit.errors import LockError, PatchkitError

MARKER = "workspace.json"
_SAFE = re.compile(r"[A-Za-z0-9_+=-][A-Za-z0-9_.+=-]*")


SAFE_RULE = "letters, digits and _ . + = - only, not starting with '.'"


def is_safe_component(value: object) -> bool:
    """Whether `value` can be one path component: no separators, not '.' or '..', not hidden, no spaces."""
    return isinstance(value, str) and bool(_SAFE.fullmatch(value)) and len(value) <= 200


def safe_component(value: str, what: str) -> str:
    """`value` if it can be one path component; otherwise a one-line error naming `what` (e.g.
    "run id", "--label")."""
    if not is_safe_component(value):
        raise PatchkitError(f"{what}: {value!r} cannot be a folder name ({SAFE_RULE})")
    return value


@dataclass(frozen=True, kw_only=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike | None = None) -> Workspace:
        """The work folder at `path` (or $PATCHKIT_WORK, or ./.patchkit); refuses a file, and a
        folder that was moved or copied from where patchkit made it."""
        given = str(path or work_folder())
        root = Path(given).resolve()
        if root.exists() and not root.is_dir():
            raise PatchkitError(f"work folder {given}: is a file, not a folder (--work / $PATCHKIT_WORK)")
        ws = cls(root=root)
        ws.check_home()
        return ws

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    def check_home(self) -> None:
        """Refuse a work folder whose git worktrees and CMake caches point into another folder."""
        if not self.root.is_dir():
            return
        made_at = ""
        if self.marker.is_file():
            try:
                rec = read_json(self.marker)
                made_at = str(rec.get("path", "")) if isinstance(rec, dict) else ""
            except (OSError, ValueError):
                made_at = ""
            if not made_at:
                raise PatchkitError(
                    f"{self.marker}: not a patchkit work folder record; remove it if the folder is yours"
                )
        else:
            made_at = _foreign_home(self.root)
        if made_at and Path(made_at) != self.root:
            raise PatchkitError(
                f"work folder {self.root} was made at {made_at} and then moved or copied: its git worktrees and CMake "
                f"builds still point there; move it back, or delete its variants/, builds/ and {MARKER} "
                "to have them made anew here (cache/ and runs/ are kept)"
            )

    def check_writable(self) -> None:
        """Refuse, before anything is written, a work folder patchkit cannot write in: on a read-only file
        system, or without write permission (the nearest existing folder of it is the one asked)."""
        at = self.root
        while not at.exists() and at != at.parent:
            at = at.parent
        try:
            readonly = bool(os.statvfs(at).f_flag & os.ST_RDONLY)
        except OSError:
            readonly = False
        if readonly or not os.access(at, os.W_OK | os.X_OK):
            why = "is on a read-only file system" if readonly else "is not writable by this user"
            where = "" if at == self.root else f" ({at})"
            raise PatchkitError(
                f"work folder {self.root}{where} {why}; patchkit writes its cache, trees, builds and runs there: "
                "give a writable folder with --work or $PATCHKIT_WORK"
            )

    def claim(self) -> None:
        """Record where this work folder is (once, when patchkit first writes to it)."""
        self.check_writable()
        if not self.marker.is_file():
            now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            write_json(self.marker, {"path": str(self.root), "created": now})

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def repo(self) -> Path:
        return self.cache / "llama.cpp.git"

    def sdist(self, filename: str) -> Path:
        return self.cache / "sdist" / safe_component(filename, "sdist file name")

    def base_meta(self, key: str) -> Path:
        return self.cache / "bases" / f"{safe_component(key, 'base key')}.json"

    def variants(self, recipe: str) -> Path:
        return self.root / "variants" / safe_component(recipe, "recipe name")

    def builds(self, recipe: str, config: str) -> Path:
        return self.root / "builds" / safe_component(recipe, "recipe name") / safe_component(config, "build config")

    def runs(self, recipe: str) -> Path:
        return self.root / "runs" / safe_component(recipe, "recipe name")

    def sweeps(self, recipe: str) -> Path:
        return self.root / "sweeps" / safe_component(recipe, "recipe name")

    @contextmanager
    def lock(self, what: Path, *, wait: bool = False, shared: bool = False, poll_s: float = 0.2) -> Iterator[None]:
        """An exclusive lock on `what` (a folder), held while writing it; a second patchkit fails fast
        (`wait`: waits, saying once for whom). `shared`: a reader's lock, held while reading it: readers at
        once, never beside a writer (a writer meeting a reader fails fast, or waits, the same way)."""
        self.check_home()
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        self.claim()
        name = re.sub(
            r"[^A-Za-z0-9_.-]+",
            "_",
            str(what.resolve().relative_to(self.root)) if what.is_relative_to(self.root) else str(what),
        )
        path = locks / f"{name}.lock"
        fd, holder = take_lock(path, shared=shared)
        if fd is None and wait:
            print(f"{what}: waiting for {holder}, which {'writes' if shared else 'uses'} it (lock {path})", flush=True)
            while fd is None:  # polled, not a blocking flock: Ctrl-C stops the wait in every thread
                proc.check_interrupt()
                time.sleep(poll_s)
                fd, holder = take_lock(path, shared=shared)
        if fd is None:
            raise LockError(f"{what}: in use by {holder} (lock {path})")
        try:
            yield
        finally:
            release_lock(fd, path, shared=shared)


def _foreign_home(root: Path) -> str:
    """For a work folder without its record: the folder its worktree links or CMake caches were
    made in, where that is not `root` (a copy made before records existed); else ''."""
    for dotgit in [
        *root.glob("variants/*/*/.git"),
        *root.glob("builds/*/*/tree/.git"),
        *root.glob("builds/*/*/each/*/tree/.git"),
    ]:
        if not dotgit.is_file():
            continue
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        gitdir = Path(text.removeprefix("gitdir:").strip())
        if gitdir.is_absolute() and not gitdir.is_relative_to(root):
            return _home_from(gitdir, "cache")
    for cache in root.glob("builds/*/*/build/CMakeCache.txt"):
        for line in cache.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("CMAKE_CACHEFILE_DIR:INTERNAL="):
                made = Path(line.split("=", 1)[1].strip())
                if made != cache.parent.resolve():
                    return _home_from(made, "builds")
    return ""


def _home_from(path: Path, top: str) -> str:
    """The work folder holding `path` (the parent of its `top` component), or `path` itself."""
    parts = path.parts
    return str(Path(*parts[: parts.index(top)])) if top in parts[1:] else str(path)


def take_lock(path: Path, *, shared: bool = False) -> tuple[int | None, str]:
    """A flock on the file `path` (made if missing): exclusive, our pid written in it, or (`shared`) a
    reader's, a line `patchkit pid N (reading)` of ours among the other readers' live ones (one line per
    hold, removed at its release; a dead reader's is dropped by the next reader: the file stays as short as
    the readers holding it): (fd, "") where taken (release_lock, or closing fd, releases it; it is released
    at exit too, however the process ends), (None, who) where another holds it (the holders the file names
    that are alive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    if not _flock_now(fd, shared):
        try:
            with _records(path.parent, shared=True):  # read between two readers' changes
                return None, _holders(_read(fd))
        finally:
            os.close(fd)
    if shared:
        try:
            with _records(path.parent) as alone:
                if alone:
                    _write(fd, [*_readers(_read(fd)), _reading()])
                else:  # the records' lock not had in time: added at the end, dropped by a reader after this one
                    os.lseek(fd, 0, os.SEEK_END)
                    os.write(fd, f"{_reading()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
    else:
        _write(fd, [f"patchkit pid {os.getpid()}"])
    return fd, ""


def release_lock(fd: int, path: Path, *, shared: bool = False) -> None:
    """Let go of the lock on `path` take_lock gave: a writer empties the file first (it names no one who holds it), a
    reader takes one line of its own out (and the dead readers' lines)."""
    try:
        if shared:
            with _records(path.parent) as alone:
                lines = _readers(_read(fd)) if alone else []
                if _reading() in lines:
                    lines.remove(_reading())
                    _write(fd, lines)
        else:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _reading() -> str:
    return f"patchkit pid {os.getpid()} (reading)"


@contextmanager
def _records(folder: Path, *, shared: bool = False, wait_s: float = 1.0) -> Iterator[bool]:
    """The lock files' records in `folder` changed one process (or thread) at a time, and read (`shared`) only
    between changes: a flock on the folder itself, apart from the locks the files hold, held for the few bytes
    written. Whether it was had: a holder stopped (SIGSTOP, Ctrl-Z) in those bytes keeps no one waiting past
    `wait_s`, and a lock is never refused for its records (a line added at the end instead, or none taken out)."""
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + wait_s
        while not (alone := _flock_now(dfd, shared)) and time.monotonic() < deadline:
            time.sleep(0.002)
        yield alone
    finally:
        os.close(dfd)


def _flock_now(fd: int, shared: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read(fd: int) -> str:
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", errors="replace")


def _write(fd: int, lines: list[str]) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, "".join(f"{line}\n" for line in lines).encode(), 0)


def _readers(text: str) -> list[str]:
    """The lines of a lock file held shared that name a live reader (a writer's line is a dead writer's: none
    holds it beside a reader)."""
    out = []
    for line in text.splitlines():
        m = re.fullmatch(r"patchkit pid (\d+) \(reading\)", line.strip())
        if m and pid_alive(int(m.group(1))):
            out.append(line.strip())
    return out


def _holders(text: str) -> str:
    """Who holds a lock, from its file: the lines whose pid is alive ("another process" if none is)."""
    alive = []
    for line in text.splitlines():
        m = re.search(r"\bpid (\d+)", line)
        if line.strip() and (m is None or pid_alive(int(m.group(1)))) and line.strip() not in alive:
            alive.append(line.strip())
    return ", ".join(alive) or "another process"


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid lives (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def machine_lock_name(what: str) -> str:
    """The abstract socket address of the machine-wide lock `what` (e.g. timing-CUDA0)."""
    return "\0patchkit-" + re.sub(r"[^A-Za-z0-9_.=-]+", "_", what)


def _holder_pid(addr: str) -> int | None:
    """The pid of the process holding the abstract socket `addr` (SO_PEERCRED), or None."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as c:
        try:
            c.connect(addr)
            pid, _, _ = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
            return pid
        except OSError:
            return None


@contextmanager
def machine_lock(what: str, doing: str, *, poll_s: float = 0.5) -> Iterator[None]:
    """A lock for the whole machine (every user, every work folder, every patchkit): a Linux abstract-namespace
    unix socket bound while held. It writes nothing anywhere and is released when this process ends, however
    it ends. A second holder waits, saying once who holds it (`doing`: what waits, e.g. "bench:kernel").
    Processes in other network namespaces (containers) do not see each other's."""
    addr = machine_lock_name(what)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    said = False
    try:
        while True:
            try:
                sock.bind(addr)
                sock.listen(8)
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise LockError(f"{doing}: cannot take the machine-wide lock {what!r}: {e.strerror}") from None
            if not said:
                pid = _holder_pid(addr)
                who = f"patchkit pid {pid}" if pid else "another patchkit"
                print(
                    f"{doing}: waiting for {who}, which holds the machine-wide lock {what!r} (two timings at once "
                    "would disturb each other)",
                    flush=True,
                )
                said = True
            time.sleep(poll_s)
        yield
    finally:
        sock.close()


# what patchkit owns in a run folder and in a work folder: an output file never replaces these
_RUN_OWNED = ("results.json", "env.json", ".lock")
_WORK_OWNED = ("cache", "variants", "builds", "sweeps", "locks", MARKER)


def refuse_own_state(path: str | os.PathLike, *, what: str = "-o", protect: Iterable[Path] = ()) -> None:
    """Raise a one-line error if writing `path` would overwrite a file patchkit owns: a run folder's
    results.json, env.json, lock or anything under its raw/; anything in a work folder's cache/,
    variants/, builds/, locks/ or its record; or one of `protect` (e.g. the recipe and its patches).
    Symbolic links are followed, so a link to such a file is refused too."""
    target = Path(path).resolve()
    for p in protect:
        if target == Path(p).resolve():
            raise PatchkitError(f"{what} {path}: would overwrite {p}, a file of the project; write elsewhere")
    for folder in target.parents:
        rel = target.relative_to(folder).parts
        if (folder / "results.json").is_file() and (rel[0] in _RUN_OWNED or (rel[0] == "raw" and len(rel) > 1)):
            raise PatchkitError(
                f"{what} {path}: would overwrite {'/'.join(rel)} of the run folder {folder}; write elsewhere"
            )
        if _is_work_folder(folder) and rel[0] in _WORK_OWNED:
            raise PatchkitError(
                f"{what} {path}: would overwrite {'/'.join(rel)} in the work folder {folder}; write elsewhere"
            )


def _is_work_folder(folder: Path) -> bool:
    return (folder / MARKER).is_file() or (folder / "cache" / "llama.cpp.git" / "HEAD").is_file()


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so that a reader sees the old or the new content, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results and reports are for everyone to read
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


class DamagedFile(PatchkitError, ValueError):
    """One of patchkit's own JSON files that is not what patchkit wrote (truncated, emptied, edited):
    one line naming it (a ValueError too, for the callers that treat a bad record as none)."""


# patchkit's files that hold one JSON object: any other content is a damaged file
_OBJECT_FILES = ("manifest.json", "results.json", MARKER, "env.json")


def read_json(path: Path) -> object:
    """A JSON file patchkit wrote; DamagedFile (one line) when it is not UTF-8 JSON, or when one of
    the object files (a build's manifest.json, ...) holds something else than an object."""
    redo = "delete it to have patchkit make it again" if path.name == "manifest.json" else "restore or delete it"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DamagedFile(f"{path}: damaged: not UTF-8 text (byte {e.start}); {redo}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        cut = "truncated, " if e.pos >= len(text.rstrip()) else ""
        raise DamagedFile(f"{path}:{e.lineno}: damaged: {cut}not JSON ({e.msg}); {redo}") from None
    if path.name in _OBJECT_FILES and not isinstance(obj, dict):
        raise DamagedFile(f"{path}: damaged: a JSON {type(obj).__name__}, not the object patchkit writes; {redo}")
    return obj


def work_folder(given: object = None, environ: Mapping[str, str] | None = None) -> str:
    """The work folder's path: --work, else $PATCHKIT_WORK, else ./.patchkit (option_set's `work`)."""
    o = option_set.OPTION["work"]
    cli = {} if given is None else {o.arg: given}  # None: not given (a given '' is refused in one line)
    got = option_set.resolve_one(o, cli, os.environ if environ is None else environ)
    if got.source != "default":
        return str(got.value)
    cwd = Path.cwd()
    found = project_work_folder(cwd, str(got.value))
    return str(got.value) if found == cwd / str(got.value) else str(found)


def project_work_folder(cwd: Path, name: str = ".patchkit") -> Path:
    """The default work folder, found the way git finds its repository: from `cwd` upwards, the first folder
    holding a work folder `name` (one patchkit made: its workspace.json), else the first holding `recipes/`
    (the project, where the recipe is found too), else `cwd` itself. So a command run in a sub-folder of the
    project uses the project's work folder, never a second one there."""
    here = [cwd, *cwd.parents]
    for d in here:
        if (d / name / MARKER).is_file():
            return d / name
    for d in here:
        if (d / "recipes").is_dir():
            return d / name
    return cwd / name
