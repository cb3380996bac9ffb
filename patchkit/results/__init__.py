"""Results bundles: one folder per run, written step by step so an interrupted run resumes.

    runs/<recipe>/<run_id>/
      env.json        the environment fingerprint (patchkit.measure.env)
      raw/            one log per command, its first line the command line
      results.json    {"schema", "recipe", "run_id", "created", "base", "variants", "steps": {name: Step}}
                      (a step's data in its format, Step.format: older ones are upgraded on reading, upgrade.py)
      .lock           held (flock) by the one process writing the folder

A step is written atomically when it ends; a finished step (ok or fail) is skipped on rerun, an
errored, interrupted or missing one is run again. Nothing earlier is overwritten: a new run gets a new folder,
and a step's raw logs get new names if the step is redone.
"""

from __future__ import annotations

import datetime as _dt
import enum
import glob
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import LockError, ResultsError
from patchkit.results.upgrade import FORMAT, upgrade
from patchkit.workspace import read_json, safe_component, take_lock, write_json

SCHEMA = 1
_SAVING = threading.RLock()  # one writer of results.json at a time within this process


class Status(str, enum.Enum):
    OK = "ok"  # ran, and everything it checks passed
    FAIL = "fail"  # ran, and something it checks failed (a test failure, a build error)
    NOT_RUN = "not_run"  # nothing ran (no backend, nothing matched, not asked for); reason says why
    ERROR = "error"  # patchkit or the tool broke (crash, timeout); rerun redoes it
    INTERRUPTED = "interrupted"  # stopped by a signal (Ctrl-C, SIGTERM) while it ran; a resume redoes it

    def __str__(self) -> str:
        return self.value


@dataclass(kw_only=True)
class Step:
    name: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    started: str = ""  # UTC, ISO 8601 with milliseconds (the timeline); '' in older runs
    finished: str = ""
    resource: str = ""  # cpu | gpu: what the step held (patchkit.run.steps.Resource)
    logs: list[str] = field(default_factory=list)  # paths relative to the run folder
    data: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT  # the format of `data` (older ones are upgraded on reading: patchkit.results.upgrade)

    def serialize(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def load(cls, d: dict) -> Step:
        return cls(**{**d, "status": Status(d["status"])})

    @property
    def done(self) -> bool:
        return self.status in (Status.OK, Status.FAIL, Status.NOT_RUN)


def new_run_id(label: str = "") -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{safe_component(label, 'run label')}" if label else now


LOCK = ".lock"  # in the run folder: held by the one process writing it


@dataclass
class Bundle:
    """A run folder and its results.json.

    A writer holds the folder's lock (`<run>/.lock`, an flock) from `create` or `open(write=True)`
    until `close()` or its exit; a second writer is refused at once with the holder's pid. Readers
    (the report) take no lock."""

    path: Path
    data: dict[str, Any]
    replay: bool = False  # re-derive steps from the raw logs already here instead of running tools
    _lock_fd: int | None = field(default=None, repr=False, compare=False)
    _replay_logs: tuple[str, ...] = field(default=(), repr=False, compare=False)
    watchers: list = field(default_factory=list, repr=False, compare=False)  # called with each recorded step

    @classmethod
    def create(cls, runs_dir: Path, *, recipe: str, run_id: str, meta: dict[str, Any]) -> Bundle:
        """A new run folder, locked for this process. Writes it: call it once the command's inputs are
        validated, so that a refused command leaves no empty run folder behind."""
        path = runs_dir / safe_component(run_id, "run id")
        path.mkdir(parents=True, exist_ok=True)
        fd = _lock(path)
        if (path / "results.json").exists():
            os.close(fd)
            raise ResultsError(f"{path}: run folder exists; resume it with --run {run_id}")
        (path / "raw").mkdir(exist_ok=True)
        data = {
            "schema": SCHEMA,
            "recipe": recipe,
            "run_id": run_id,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **meta,
            "steps": {},
        }
        b = cls(path=path, data=data, _lock_fd=fd)
        b.save()
        return b

    @classmethod
    def open(cls, path: Path, *, write: bool = False) -> Bundle:
        """An existing run folder; with `write`, locked for this process first (see the class)."""
        f = path / "results.json"
        if not f.is_file():
            raise ResultsError(f"{f}: no results.json (not a patchkit run folder)")
        fd = _lock(path) if write else None
        try:
            data = read_results(f)
        except ResultsError:
            if fd is not None:
                os.close(fd)
            raise
        return cls(path=path, data=data, _lock_fd=fd)

    def close(self) -> None:
        """Release the writer's lock (also released when the process ends)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save(self) -> None:
        with _SAVING:
            write_json(self.path / "results.json", self.data)

    @property
    def raw(self) -> Path:
        return self.path / "raw"

    @contextmanager
    def replaying(self, step: Step) -> Iterator[Bundle]:
        """Replay mode for re-deriving `step`: each log the runner asks for is the one results.json
        records in the step's `logs` (a resumed step's `x.2.log`, not the first attempt's `x.log`)."""
        self.replay, self._replay_logs = True, tuple(step.logs)
        try:
            yield self
        finally:
            self.replay, self._replay_logs = False, ()

    def raw_log(self, name: str) -> Path:
        """A fresh log path under raw/ (never an existing file: a redone step keeps the old log);
        when replaying, the log of that name that the step recorded, else the newest one there."""
        safe = re.sub(r"[^A-Za-z0-9_.+=-]+", "_", name)
        if self.replay:
            return self._replayed_log(safe)
        p = self.raw / f"{safe}.log"
        n = 2
        while p.exists():
            p = self.raw / f"{safe}.{n}.log"
            n += 1
        return p

    def _replayed_log(self, safe: str) -> Path:
        pattern = re.compile(rf"{re.escape(safe)}(?:\.(\d+))?\.log")

        def attempt(name: str) -> int:
            m = pattern.fullmatch(name)
            return -1 if m is None else int(m.group(1) or 1)

        recorded = [r for r in self._replay_logs if Path(r).parent == Path("raw") and attempt(Path(r).name) > 0]
        if recorded:
            return self.path / max(recorded, key=lambda r: attempt(Path(r).name))
        on_disk = [p for p in self.raw.glob(f"{glob.escape(safe)}*.log") if attempt(p.name) > 0]
        return max(on_disk, key=lambda p: attempt(p.name)) if on_disk else self.raw / f"{safe}.log"

    def rel(self, p: Path) -> str:
        return str(Path(p).resolve().relative_to(self.path.resolve()))

    def step(self, name: str) -> Step | None:
        d = self.data["steps"].get(name)
        return Step.load(d) if d else None

    def record(self, step: Step) -> Step:
        with _SAVING:  # the CPU and GPU lanes of one run both record (patchkit.run.lanes)
            step.finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
            self.data["steps"][step.name] = step.serialize()
            self.save()
        for w in self.watchers:  # outside the lock: a watcher may read the folder (patchkit.run.live)
            w(step)
        return step

    def set_meta(self, **kw: Any) -> None:
        with _SAVING:
            self.data.update(kw)
            self.save()

    @property
    def env(self) -> dict[str, Any]:
        f = self.path / "env.json"
        return read_json(f) if f.is_file() else {}  # type: ignore[return-value]


def _lock(path: Path) -> int:
    fd, holder = take_lock(path / LOCK)
    if fd is None:
        pid = re.search(r"\d+", holder)
        raise LockError(f"run folder {path} is in use by {'pid ' + pid.group(0) if pid else holder}")
    return fd


def read_results(f: Path) -> dict[str, Any]:
    """A results.json, checked to be one of ours (schema)."""
    try:
        data = read_json(f)
    except (OSError, ValueError) as e:
        raise ResultsError(f"{f}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else None
        raise ResultsError(f"{f}: unknown results schema {got!r} (expected {SCHEMA})")
    steps = data.get("steps") if data.get("steps") is not None else {}
    if not isinstance(steps, dict):
        raise ResultsError(f"{f}: 'steps' is a JSON {type(steps).__name__}, not the object of steps patchkit writes")
    for name, st in steps.items():
        if not isinstance(st, dict) or not isinstance(st.get("data", {}), dict):
            what = type(st).__name__ if not isinstance(st, dict) else f"step with a {type(st['data']).__name__} as data"
            raise ResultsError(f"{f}: step {name!r} is malformed: a JSON {what}, not the object patchkit writes")
        fmt = st.get("format", 1)
        if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
            raise ResultsError(
                f'{f}: step {name!r} has "format": {json.dumps(fmt)}, not a format patchkit writes '
                f"(a whole number from 1; today's is {FORMAT}): the file was edited or damaged"
            )
    if steps:
        data["steps"] = upgrade(steps)  # older formats read as today's
    return data


def _created(run: Path) -> tuple[_dt.datetime, str] | None:
    """A run's (created time, name) for ordering; None for a folder without a readable results.json."""
    try:
        data = read_results(run / "results.json")
    except ResultsError:
        return None
    if not data.get("steps"):
        return None
    try:
        t = _dt.datetime.fromisoformat(str(data.get("created", "")))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)), run.name


def latest_run(runs_dir: Path) -> Path:
    """The run made last (its results.json `created` time; ties by folder name) among the runs that
    recorded at least one step: an empty run folder (a command refused after making it, or killed
    before its first step) is never the default."""
    keyed = [(k, p) for p in runs_dir.glob("*") if (p / "results.json").is_file() and (k := _created(p))]
    if not keyed:
        raise ResultsError(
            f"{runs_dir}: no run with a recorded step yet (run `patchkit test` or `patchkit bench` first)"
        )
    return max(keyed)[1]
